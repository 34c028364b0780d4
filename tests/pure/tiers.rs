//! The tier helper's own rules (tests/common/tier.rs is included by many test binaries;
//! its tests live here, once).

use crate::common::tier::{Tier, required_in};

#[test]
fn tier_lists() {
    assert!(required_in("pure,host,vm,pipelines", Tier::Vm));
    assert!(required_in("pure host", Tier::Host));
    assert!(required_in("all", Tier::Pipelines));
    assert!(!required_in("pure,host", Tier::Vm));
    assert!(!required_in("", Tier::Pure));
    assert!(!required_in("hostile", Tier::Host));
}
