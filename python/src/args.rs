//! Whole-number and text arguments, converted where their name is known.
//!
//! PyO3 converts a typed argument before the method's body runs, and its conversion of an
//! int into `u64` words a negative or too large one as `OverflowError: can't convert
//! negative int to unsigned`, naming the argument only in a note. A method takes such an
//! argument as a [`Whole`] instead and converts it in its body with [`Whole::get`] (or
//! [`opt`] for an optional one), which names the argument and the range it takes. A text
//! argument that callers are likely to pass as bytes is a [`Text`] for the same reason: PyO3's
//! refusal of bytes for a `String` does not name the argument either.

use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyString};

/// A whole-number argument as Python passed it; [`Whole::get`] converts it.
pub struct Whole<'py>(Bound<'py, PyAny>);

impl<'a, 'py> FromPyObject<'a, 'py> for Whole<'py> {
    type Error = std::convert::Infallible;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> Result<Self, Self::Error> {
        Ok(Whole(obj.to_owned()))
    }
}

/// A Rust integer type an argument converts into, with the range it names when refusing.
pub trait Integer: for<'a, 'py> FromPyObject<'a, 'py> {
    /// The smallest value, as a refusal words it.
    const MIN: i128;
    /// The largest value, as a refusal words it.
    const MAX: i128;
}

macro_rules! integers {
    ($($t:ty),*) => {
        $(impl Integer for $t {
            const MIN: i128 = <$t>::MIN as i128;
            const MAX: i128 = <$t>::MAX as i128;
        })*
    };
}
integers!(u32, u64, usize, i64);

impl Whole<'_> {
    /// The argument `name` as a `T`: a `ValueError` naming it and `T`'s range when it is an
    /// int out of that range, a `TypeError` naming it when it is not an int (a bool is not).
    pub fn get<T: Integer>(&self, name: &str) -> PyResult<T> {
        let not_int = || {
            let kind = self
                .0
                .get_type()
                .name()
                .map_or_else(|_| "?".to_owned(), |n| n.to_string());
            PyTypeError::new_err(format!("{name} must be an int, got {kind}"))
        };
        if self.0.is_instance_of::<PyBool>() {
            return Err(not_int());
        }
        self.0.extract::<T>().map_err(|e| {
            let (py, e): (_, PyErr) = (self.0.py(), e.into());
            if e.is_instance_of::<PyOverflowError>(py) {
                PyValueError::new_err(format!(
                    "{name} must be a whole number from {} to {}, got {}",
                    T::MIN,
                    T::MAX,
                    self.0
                ))
            } else if e.is_instance_of::<PyTypeError>(py) {
                not_int()
            } else {
                e
            }
        })
    }
}

/// An optional whole-number argument `name` as an `Option<T>` (None stays None); refused as
/// [`Whole::get`] refuses.
pub fn opt<T: Integer>(w: &Option<Whole<'_>>, name: &str) -> PyResult<Option<T>> {
    w.as_ref().map(|w| w.get(name)).transpose()
}

/// A text argument as Python passed it; [`Text::get`] converts it.
pub struct Text<'py>(Bound<'py, PyAny>);

impl<'a, 'py> FromPyObject<'a, 'py> for Text<'py> {
    type Error = std::convert::Infallible;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> Result<Self, Self::Error> {
        Ok(Text(obj.to_owned()))
    }
}

impl Text<'_> {
    /// The argument `name` as a `String`: a `TypeError` naming it when it is not a str, and
    /// for bytes saying how to pass them.
    pub fn get(&self, name: &str) -> PyResult<String> {
        if let Ok(s) = self.0.cast::<PyString>() {
            return Ok(s.to_cow()?.into_owned());
        }
        let kind = self
            .0
            .get_type()
            .name()
            .map_or_else(|_| "?".to_owned(), |n| n.to_string());
        let next = if self.0.is_instance_of::<PyBytes>() {
            format!(": decode it first ({name}=data.decode(\"utf-8\")), or store binary data base64-encoded")
        } else {
            String::new()
        };
        Err(PyTypeError::new_err(format!(
            "{name} must be a str, got {kind}{next}"
        )))
    }
}

/// An optional text argument `name` as an `Option<String>` (None stays None); refused as
/// [`Text::get`] refuses.
pub fn opt_text(t: &Option<Text<'_>>, name: &str) -> PyResult<Option<String>> {
    t.as_ref().map(|t| t.get(name)).transpose()
}
