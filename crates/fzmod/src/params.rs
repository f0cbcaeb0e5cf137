//! Typed reading of a stage's TOML keys, refusing unknown keys and wrong types.

use crate::element::DType;
use crate::error::{Error, Result};
use std::cell::RefCell;

/// Keys every `[[stage]]` table may carry besides the stage's own parameters.
const STRUCTURAL_KEYS: [&str; 3] = ["name", "type", "inputs"];

/// Reads parameters out of one `[[stage]]` table.
pub struct TomlParams<'a> {
    table: &'a toml::Table,
    stage_type: &'a str,
    used: RefCell<Vec<String>>,
}

impl<'a> TomlParams<'a> {
    pub fn new(table: &'a toml::Table, stage_type: &'a str) -> Self {
        TomlParams { table, stage_type, used: RefCell::new(Vec::new()) }
    }

    fn get(&self, key: &str) -> Option<&'a toml::Value> {
        self.used.borrow_mut().push(key.to_string());
        self.table.get(key)
    }

    fn wrong(&self, key: &str, expected: &str) -> Error {
        Error::Config(format!("{}: key '{key}' must be {expected}", self.stage_type))
    }

    pub fn u32(&self, key: &str, default: u32) -> Result<u32> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v
                .as_integer()
                .and_then(|i| u32::try_from(i).ok())
                .ok_or_else(|| self.wrong(key, "a non-negative integer")),
        }
    }

    pub fn bool(&self, key: &str, default: bool) -> Result<bool> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.as_bool().ok_or_else(|| self.wrong(key, "true or false")),
        }
    }

    pub fn f64(&self, key: &str) -> Result<Option<f64>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_float()
                .or_else(|| v.as_integer().map(|i| i as f64))
                .map(Some)
                .ok_or_else(|| self.wrong(key, "a number")),
        }
    }

    pub fn str(&self, key: &str) -> Result<Option<&'a str>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v.as_str().map(Some).ok_or_else(|| self.wrong(key, "a string")),
        }
    }

    pub fn dtype(&self, key: &str, default: DType, allowed: &[DType]) -> Result<DType> {
        let Some(name) = self.str(key)? else {
            return Ok(default);
        };
        let d = DType::parse(name).map_err(|e| Error::Config(format!("{}: {e}", self.stage_type)))?;
        if !allowed.contains(&d) {
            let names: Vec<_> = allowed.iter().map(|a| a.toml_name()).collect();
            return Err(Error::Config(format!(
                "{}: {key} = \"{name}\" not supported (expected {})",
                self.stage_type,
                names.join(" or ")
            )));
        }
        Ok(d)
    }

    /// Fail on keys nobody asked for (typos must not be silently ignored).
    pub fn finish(self) -> Result<()> {
        let used = self.used.borrow();
        for key in self.table.keys() {
            if !STRUCTURAL_KEYS.contains(&key.as_str()) && !used.iter().any(|u| u == key) {
                return Err(Error::Config(format!("{}: unknown key '{key}'", self.stage_type)));
            }
        }
        Ok(())
    }
}
