//! The run report: printed for humans with --report, written as JSON with --json.

use fzmod::{Header, Quality};
use serde_json::{json, Map, Value};
use std::io::Write;

/// Everything a compress/decompress run measured.
#[derive(Default)]
pub struct Report {
    pub input: String,
    pub dtype: String,
    pub shape: Vec<u64>,
    pub preset: String,
    pub pipeline: Vec<(String, String)>,
    /// The pipeline's archive was larger than the input, so the input was stored as it is.
    pub stored_raw: bool,
    pub backend: String,
    pub backend_note: String,
    pub error_mode: String,
    pub error_bound: f64,
    pub error_bound_abs: Option<f64>,
    pub num_elements: u64,
    pub original_bytes: u64,
    pub compressed_bytes: u64,
    pub compress_seconds: Option<f64>,
    pub decompress_seconds: Option<f64>,
    pub quality: Option<Quality>,
}

/// A number with about six significant digits: plain when it reads well, scientific otherwise.
pub fn num(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let exponent = x.abs().log10().floor() as i32;
    if (-4..6).contains(&exponent) {
        let decimals = (5 - exponent).max(0) as usize;
        let text = format!("{x:.decimals$}");
        if text.contains('.') {
            text.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            text
        }
    } else {
        let text = format!("{x:.5e}");
        let (mantissa, exp) = text.split_once('e').expect("scientific notation has an exponent");
        let mantissa =
            if mantissa.contains('.') { mantissa.trim_end_matches('0').trim_end_matches('.') } else { mantissa };
        format!("{mantissa}e{exp}")
    }
}

fn gbps(bytes: u64, seconds: Option<f64>) -> Option<f64> {
    seconds.filter(|&s| s > 0.0).map(|s| bytes as f64 / s / 1e9)
}

/// The C-order index of flat element `flat` in `shape`, e.g. `[12, 40, 7]`.
fn nd_index(flat: usize, shape: &[u64]) -> Vec<u64> {
    let mut rest = flat as u64;
    let mut index: Vec<u64> = shape
        .iter()
        .rev()
        .map(|&extent| {
            let i = rest % extent.max(1);
            rest /= extent.max(1);
            i
        })
        .collect();
    index.reverse();
    index
}

impl Report {
    pub fn from_header(h: &Header) -> Report {
        let num_elements = h.num_elements().unwrap_or(0);
        Report {
            dtype: h.dtype.short_name().into(),
            shape: h.shape.clone(),
            preset: h.preset.clone(),
            pipeline: h
                .stages
                .iter()
                .map(|s| {
                    let kind = fzmod::stage::kind_by_id(s.type_id).map(|k| k.name).unwrap_or("?");
                    (s.name.clone(), kind.to_string())
                })
                .collect(),
            stored_raw: fzmod::is_stored_raw(h),
            error_mode: h.error_mode.name().into(),
            error_bound: h.error_bound,
            error_bound_abs: fzmod::archived_abs_bound(h),
            num_elements,
            original_bytes: num_elements * h.dtype.size() as u64,
            ..Report::default()
        }
    }

    pub fn ratio(&self) -> f64 {
        self.original_bytes as f64 / self.compressed_bytes.max(1) as f64
    }

    pub fn bits_per_value(&self) -> f64 {
        8.0 * self.compressed_bytes as f64 / self.num_elements.max(1) as f64
    }

    /// The error every element must meet: the quantizer's bound, or 0 for lossless archives.
    fn guaranteed_error(&self) -> f64 {
        self.error_bound_abs.unwrap_or(0.0)
    }

    fn within_bound(&self, q: &Quality) -> bool {
        q.max_abs_error <= self.guaranteed_error() && q.special_mismatches == 0
    }

    /// Why the measured quality breaks the archive's guarantee, if it does.
    pub fn violation(&self) -> Option<String> {
        let q = self.quality.as_ref()?;
        if self.within_bound(q) {
            return None;
        }
        Some(format!(
            "BOUND VIOLATED: max error {} at {:?} > bound {}, {} NaN/Inf values changed",
            num(q.max_abs_error),
            nd_index(q.max_error_index, &self.shape),
            num(self.guaranteed_error()),
            q.special_mismatches
        ))
    }

    pub fn print(&self, out: &mut dyn Write) {
        // A report that cannot be printed (closed pipe) is not worth failing the run for.
        let _ = self.write_text(out);
    }

    fn write_text(&self, out: &mut dyn Write) -> std::io::Result<()> {
        let shape: Vec<String> = self.shape.iter().map(|d| d.to_string()).collect();
        let stages: Vec<String> = self.pipeline.iter().map(|(n, t)| format!("{n}:{t}")).collect();
        writeln!(out, "input        {} ({} {})", self.input, self.dtype, shape.join("x"))?;
        writeln!(
            out,
            "pipeline     {} [{}]",
            if self.preset.is_empty() { "custom" } else { &self.preset },
            stages.join(" -> ")
        )?;
        if self.stored_raw {
            writeln!(
                out,
                "stored       as is (lossless): the pipeline's archive would have been larger than the input"
            )?;
        }
        let note = if self.backend_note.is_empty() { String::new() } else { format!(" ({})", self.backend_note) };
        writeln!(out, "backend      {}{note}", self.backend)?;
        match self.error_bound_abs {
            Some(abs) => {
                writeln!(out, "bound        {} {:e} (absolute {})", self.error_mode, self.error_bound, num(abs))?
            }
            None if self.stored_raw => {
                writeln!(out, "bound        {} {:e} requested; values are exact", self.error_mode, self.error_bound)?
            }
            None => writeln!(out, "bound        none (lossless pipeline)")?,
        }
        writeln!(
            out,
            "size         {} -> {} bytes, ratio {}, {} bits/value",
            self.original_bytes,
            self.compressed_bytes,
            num(self.ratio()),
            num(self.bits_per_value())
        )?;
        for (what, seconds) in [("compress  ", self.compress_seconds), ("decompress", self.decompress_seconds)] {
            if let Some(s) = seconds {
                let speed = gbps(self.original_bytes, Some(s)).map_or("-".into(), num);
                writeln!(out, "{what}   {} s, {speed} GB/s", num(s))?;
            }
        }
        if let Some(q) = &self.quality {
            self.write_quality(q, out)?;
        }
        Ok(())
    }

    fn write_quality(&self, q: &Quality, out: &mut dyn Write) -> std::io::Result<()> {
        if q.value_min <= q.value_max {
            let (lo, hi) = (num(q.value_min), num(q.value_max));
            writeln!(out, "value range  {lo} .. {hi} (range {})", num(q.value_range()))?;
        } else {
            writeln!(out, "value range  none (no finite values)")?;
        }
        let verdict = if self.within_bound(q) { "within bound" } else { "BOUND VIOLATED" };
        let at = nd_index(q.max_error_index, &self.shape);
        writeln!(out, "max error    {} at {at:?}, {verdict}", num(q.max_abs_error))?;
        if q.mse == 0.0 {
            writeln!(out, "PSNR         inf (exact reconstruction)")?;
        } else if q.value_range() == 0.0 {
            writeln!(out, "PSNR         n/a (constant field), RMSE {}", num(q.mse.sqrt()))?;
        } else {
            writeln!(out, "PSNR         {} dB, NRMSE {}", num(q.psnr_db), num(q.nrmse))?;
        }
        if q.special_mismatches > 0 {
            writeln!(out, "NaN/Inf      {} values did not come back bit-identical", q.special_mismatches)?;
        }
        Ok(())
    }

    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("tool".into(), json!({"name": "fzmod", "version": env!("CARGO_PKG_VERSION")}));
        m.insert("input".into(), json!(self.input));
        m.insert("dtype".into(), json!(self.dtype));
        m.insert("shape".into(), json!(self.shape));
        m.insert("preset".into(), json!(self.preset));
        m.insert(
            "pipeline".into(),
            Value::Array(self.pipeline.iter().map(|(n, t)| json!({"name": n, "type": t})).collect()),
        );
        m.insert("stored_raw".into(), json!(self.stored_raw));
        m.insert("backend".into(), json!(self.backend));
        m.insert("backend_note".into(), json!(self.backend_note));
        m.insert("error_mode".into(), json!(self.error_mode));
        m.insert("error_bound".into(), json!(self.error_bound));
        m.insert("error_bound_abs".into(), json!(self.error_bound_abs));
        m.insert("original_bytes".into(), json!(self.original_bytes));
        m.insert("compressed_bytes".into(), json!(self.compressed_bytes));
        m.insert("ratio".into(), json!(self.ratio()));
        m.insert("bits_per_value".into(), json!(self.bits_per_value()));
        m.insert("compress_seconds".into(), json!(self.compress_seconds));
        m.insert("decompress_seconds".into(), json!(self.decompress_seconds));
        let total = self.compress_seconds.unwrap_or(0.0) + self.decompress_seconds.unwrap_or(0.0);
        m.insert("compress_plus_decompress_seconds".into(), json!(total));
        m.insert("compress_gbps".into(), json!(gbps(self.original_bytes, self.compress_seconds)));
        m.insert("decompress_gbps".into(), json!(gbps(self.original_bytes, self.decompress_seconds)));
        if let Some(q) = &self.quality {
            let finite = q.value_min <= q.value_max;
            m.insert("value_min".into(), json!(finite.then_some(q.value_min)));
            m.insert("value_max".into(), json!(finite.then_some(q.value_max)));
            m.insert("max_abs_error".into(), json!(q.max_abs_error));
            m.insert("max_error_index".into(), json!(q.max_error_index));
            m.insert("max_error_position".into(), json!(nd_index(q.max_error_index, &self.shape)));
            m.insert("psnr_db".into(), json!((q.value_range() > 0.0 && q.mse > 0.0).then_some(q.psnr_db)));
            m.insert("nrmse".into(), json!(q.nrmse));
            m.insert("special_value_mismatches".into(), json!(q.special_mismatches));
            m.insert("within_bound".into(), json!(self.within_bound(q)));
        }
        Value::Object(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_keep_about_six_significant_digits() {
        assert_eq!(num(0.0012345678), "0.00123457");
        assert_eq!(num(4.0), "4");
        assert_eq!(num(8.683_217_7), "8.68322");
        assert_eq!(num(1e-3), "0.001");
        assert_eq!(num(1.0e-9), "1e-9");
        assert_eq!(num(12_345_678.0), "1.23457e7");
        assert_eq!(num(f64::INFINITY), "inf");
    }

    #[test]
    fn flat_indices_become_c_order_positions() {
        assert_eq!(nd_index(0, &[3, 4, 5]), vec![0, 0, 0]);
        assert_eq!(nd_index(5 * 4 + 7, &[3, 4, 5]), vec![1, 1, 2]);
        assert_eq!(nd_index(59, &[3, 4, 5]), vec![2, 3, 4]);
    }
}
