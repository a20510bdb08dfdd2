//! `twins!`: a capability's sync method and its async twin from one body, as redis-rs'
//! `implement_commands!` writes its sync and async command traits from one list.
//!
//! ```text
//! twins! {
//!     impl PyStore;
//!     /// Doc of the sync method (the twin's says "Async twin of `name`.").
//!     #[pyo3(signature = (sid, cascade = true))]
//!     fn close_session / aclose_session(self, py, sid: String, cascade: bool) -> u64 {
//!         let s = self.s();                       // under the GIL: convert arguments
//!         async move { s.close_session(&sid, cascade).await }   // the Rust future
//!     }
//! }
//! ```
//!
//! The body runs with the GIL held (it may use `py` and `?` on argument conversions) and
//! evaluates to a `Send + 'static` future of `agentstate::Result<T>`. The sync method runs
//! it with [`crate::bridge::block`] (GIL released) and returns `T`; the async twin hands it
//! to [`crate::bridge::awaitable`]. Either words an error for the receiver's `at`
//! (`Situation`). Each invocation is one `#[pymethods]` block (PyO3's `multiple-pymethods`),
//! so a capability's methods live in its own file.

macro_rules! twins {
    (
        impl $ty:ident;
        $(
            $(#[doc = $doc:literal])*
            $(#[pyo3($($opt:tt)*)])?
            fn $name:ident / $aname:ident($self_:ident, $py:ident $(, $arg:ident: $argty:ty)* $(,)?) -> $ret:ty
            $body:block
        )*
    ) => {
        #[pyo3::pymethods]
        impl $ty {
            $(
                $(#[doc = $doc])*
                $(#[pyo3($($opt)*)])?
                #[allow(clippy::too_many_arguments)]
                fn $name(&$self_, $py: pyo3::Python<'_> $(, $arg: $argty)*) -> pyo3::PyResult<$ret> {
                    let future = $body;
                    crate::bridge::block::<_, $ret>($py, &$self_.at, future)
                }

                #[doc = concat!("Async twin of `", stringify!($name), "`.")]
                $(#[pyo3($($opt)*)])?
                #[allow(clippy::too_many_arguments)]
                fn $aname<'py>(
                    &$self_,
                    $py: pyo3::Python<'py>
                    $(, $arg: $argty)*
                ) -> pyo3::PyResult<pyo3::Bound<'py, pyo3::PyAny>> {
                    let future = $body;
                    crate::bridge::awaitable::<_, $ret>($py, &$self_.at, future)
                }
            )*
        }
    };
}
