//! `uevrec top --by pod`: the row a record counts in is its pod, not its event. The
//! counting thread keeps a [`ContextTracker`] (the session tracks cgroups and reads the
//! kubelet's log directories as for `record`), and each record's row is
//! `namespace/pod` once the kubelet named its pod, the pod UID before, and [`OUTSIDE`]
//! for records outside pods; each label gets a model slot of its own. Bounded: at most
//! [`MAX_ROWS`] labels get rows, records of further pods count in the row [`OTHER`].

use std::collections::HashMap;

use uevrec_parsers::ContextTracker;

use super::model::Model;

/// Distinct rows (pods) counted; records of further pods count in [`OTHER`].
pub const MAX_ROWS: usize = 1024;
/// The row of records outside pods (or whose cgroup is unknown).
pub const OUTSIDE: &str = "-";
/// The row of records of pods beyond [`MAX_ROWS`]: how many records went there is that
/// row's total.
pub const OTHER: &str = "other";

/// How `top` groups its rows (`--by`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum GroupBy {
    /// One row per event (`system:event`).
    #[default]
    Event,
    /// One row per Kubernetes pod (`namespace/pod`, the UID while unnamed, `-` outside
    /// pods).
    Pod,
}

/// Labels → the model's slots, and the tracker the labels come from.
#[derive(Debug, Default)]
pub struct PodRows {
    /// Who is who (cgroup paths, pod names).
    pub tracker: ContextTracker,
    slots: HashMap<String, u32>,
    /// The last record's (cgroup, tracker version) and its slot: a record's label is
    /// worked out once per change of its cgroup or of the tracker (a cache of one), not
    /// per record.
    last: Option<((Option<u64>, u64), u32)>,
}

/// The row label of a record in cgroup `cgroup` (None: unknown).
pub fn label(tracker: &ContextTracker, cgroup: Option<u64>) -> String {
    match cgroup.and_then(|id| tracker.pod_identity(id)) {
        Some(pod) => match pod.names {
            Some((namespace, name)) => format!("{namespace}/{name}"),
            None => pod.uid,
        },
        None => OUTSIDE.to_owned(),
    }
}

impl PodRows {
    /// The model slot of a record of thread `tid` of process `pid` whose sample named
    /// `cgroup` (its row attached in `model` when new).
    pub fn slot(&mut self, model: &mut Model, pid: u32, tid: u32, cgroup: Option<u64>) -> u32 {
        let cgroup = cgroup.or_else(|| self.tracker.cgroup_of(pid, tid));
        let key = (cgroup, self.tracker.version());
        if let Some((k, slot)) = self.last
            && k == key
        {
            return slot;
        }
        let mut name = label(&self.tracker, cgroup);
        if !self.slots.contains_key(&name) && self.slots.len() >= MAX_ROWS {
            name = OTHER.to_owned();
        }
        let next = u32::try_from(self.slots.len()).unwrap_or(u32::MAX);
        let slot = match self.slots.get(&name) {
            Some(&s) => s,
            None => {
                self.slots.insert(name.clone(), next);
                model.attach(next, &name);
                next
            }
        };
        self.last = Some((key, slot));
        slot
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use uevrec_parsers::ContextUpdate;

    #[test]
    fn rows_are_pods_then_names_and_bounded() {
        let uid = "11111111-aaaa-4bbb-8ccc-000000000001";
        let path = format!("/kubepods/besteffort/pod{uid}/{}", "ab".repeat(32));
        let mut rows = PodRows::default();
        let mut model = Model::new();
        rows.tracker.apply(
            None,
            ContextUpdate::Cgroup {
                id: 5,
                path: path.as_bytes(),
            },
        );
        let s = rows.slot(&mut model, 1, 1, Some(5));
        model.record(s, 1, 10);
        let s = rows.slot(&mut model, 2, 2, None);
        model.record(s, 2, 10);
        rows.tracker.apply(
            None,
            ContextUpdate::Pod {
                uid: uid.as_bytes(),
                namespace: b"ns",
                name: b"p",
            },
        );
        let s = rows.slot(&mut model, 1, 1, Some(5));
        model.record(s, 1, 10);
        model.tick(Duration::from_secs(1));
        let got: Vec<(String, u64)> = model
            .snapshot()
            .rows
            .iter()
            .map(|r| (r.event.clone(), r.records))
            .collect();
        assert_eq!(
            got,
            [(uid.to_string(), 1), ("-".into(), 1), ("ns/p".into(), 1)]
        );
        // Past MAX_ROWS labels, records count in "other".
        for i in 0..MAX_ROWS as u64 + 5 {
            let uid = format!("{i:08x}-aaaa-4bbb-8ccc-000000000001");
            let path = format!("/kubepods/pod{uid}");
            rows.tracker.apply(
                None,
                ContextUpdate::Cgroup {
                    id: 100 + i,
                    path: path.as_bytes(),
                },
            );
            let s = rows.slot(&mut model, 1, 1, Some(100 + i));
            model.record(s, 1, 1);
        }
        assert_eq!(rows.slots.len(), MAX_ROWS + 1);
        model.tick(Duration::from_secs(1));
        let other = model.snapshot().rows.into_iter().find(|r| r.event == OTHER);
        // 3 rows before, MAX_ROWS - 3 more fit, the rest (8) counted in "other".
        assert_eq!(other.map(|r| r.records), Some(8));
    }
}
