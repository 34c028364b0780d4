//! A record's fields as a CEL map whose entries are made only when a condition reads
//! them: [`lazy_map!`] implements CEL's `Val`, `Sizer` and `Indexer` for a `Copy` type
//! with `lookup(name) -> Option<Box<dyn Val>>` (the entry, `None`: a missing key) and
//! `count() -> i64` (`size(fields)`): plain events' fields (`record_vars`) and
//! EventHeader payloads' (`eventheader_fields`).

/// `Val`, `Sizer` and `Indexer` for the lazy map type `$t` (see the module docs).
macro_rules! lazy_map {
    ($t:ident) => {
        impl cel::common::value::Val for $t<'_> {
            fn get_type(&self) -> &cel::common::types::Type {
                &cel::common::types::MAP_TYPE
            }

            fn cel_type() -> &'static cel::common::types::Type {
                &cel::common::types::MAP_TYPE
            }

            fn as_indexer<'b, 'v>(&'b self) -> Option<&'b (dyn cel::common::traits::Indexer + 'v)>
            where
                Self: 'v,
            {
                Some(self)
            }

            fn into_indexer<'v>(
                self: Box<Self>,
            ) -> Option<Box<dyn cel::common::traits::Indexer + 'v>>
            where
                Self: 'v,
            {
                Some(self)
            }

            fn as_sizer(&self) -> Option<&dyn cel::common::traits::Sizer> {
                Some(self)
            }

            fn clone_as_boxed<'v>(&self) -> Box<dyn cel::common::value::Val + 'v>
            where
                Self: 'v,
            {
                Box::new(*self)
            }
        }

        impl cel::common::traits::Sizer for $t<'_> {
            fn size(&self) -> cel::common::types::CelInt {
                cel::common::types::CelInt::from(self.count())
            }
        }

        impl cel::common::traits::Indexer for $t<'_> {
            fn get<'b, 'v>(
                &'b self,
                idx: &dyn cel::common::value::Val,
            ) -> Result<cel::common::value::CowVal<'b, 'v>, cel::ExecutionError>
            where
                Self: 'v,
            {
                let name =
                    <&str>::try_from(idx).map_err(|_| cel::ExecutionError::UnexpectedType {
                        got: idx.get_type().name().to_owned(),
                        want: "string".to_owned(),
                    })?;
                self.lookup(name)
                    .map(cel::common::value::CowVal::Owned)
                    .ok_or_else(|| cel::ExecutionError::no_such_key(name))
            }

            fn steal<'v>(
                self: Box<Self>,
                idx: &dyn cel::common::value::Val,
            ) -> Result<Box<dyn cel::common::value::Val + 'v>, cel::ExecutionError>
            where
                Self: 'v,
            {
                self.get(idx).map(cel::common::value::CowVal::into_owned)
            }
        }
    };
}

pub(super) use lazy_map;
