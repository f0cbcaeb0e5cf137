//! The run report: printed for humans with --report, written as JSON with --json.

use anyhow::{bail, Result};
use fzmod::policy::position;
use fzmod::{ArchiveFacts, Header, Quality, QualityFacts, Verdict};
use serde_json::{json, Map, Value};
use std::fmt::Write;

/// Everything a compress/decompress run measured.
pub struct Report {
    /// The archive, under the names every front end reports.
    pub facts: ArchiveFacts,
    /// The input as named in messages.
    pub input: String,
    pub backend: String,
    pub backend_note: String,
    pub compress_seconds: Option<f64>,
    pub decompress_seconds: Option<f64>,
    /// The comparison with the original and the library's verdict on it.
    quality: Option<(Quality, Verdict)>,
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

/// The fields of a serialized fact struct (each is an object).
pub fn fields(value: Value) -> Result<Map<String, Value>> {
    match value {
        Value::Object(m) => Ok(m),
        other => bail!("report facts serialized to {other}, not an object"),
    }
}

impl Report {
    /// A report of the archive `header` of `compressed_bytes` bytes, made from `input`.
    pub fn new(header: &Header, compressed_bytes: usize, input: String) -> Report {
        Report {
            facts: ArchiveFacts::of(header, compressed_bytes),
            input,
            backend: String::new(),
            backend_note: String::new(),
            compress_seconds: None,
            decompress_seconds: None,
            quality: None,
        }
    }

    /// Record how the reconstruction compares with the original, judged by the library's
    /// verdict against the archive's guarantee.
    pub fn set_quality(&mut self, quality: Quality) {
        let verdict = Verdict::judge(&quality, self.facts.abs_bound);
        self.quality = Some((quality, verdict));
    }

    fn shape(&self) -> Vec<usize> {
        self.facts.shape.iter().map(|&d| d as usize).collect()
    }

    /// Why the measured quality breaks the archive's guarantee, if it does.
    pub fn violation(&self) -> Option<String> {
        let (_, verdict) = self.quality.as_ref()?;
        verdict.violation(&self.shape())
    }

    /// The human-readable report.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        self.write_text(&mut s).expect("formatting into a String cannot fail");
        s
    }

    fn write_text(&self, out: &mut String) -> std::fmt::Result {
        let f = &self.facts;
        let shape: Vec<String> = f.shape.iter().map(|d| d.to_string()).collect();
        let stages: Vec<String> = f.stages.iter().map(|st| format!("{}:{}", st.name, st.type_name)).collect();
        writeln!(out, "input        {} ({} {})", self.input, f.dtype, shape.join("x"))?;
        writeln!(
            out,
            "pipeline     {} [{}]",
            if f.preset.is_empty() { "custom" } else { &f.preset },
            stages.join(" -> ")
        )?;
        if f.stored_raw {
            writeln!(
                out,
                "stored       as is (lossless): the pipeline's archive would have been larger than the input"
            )?;
        }
        let note = if self.backend_note.is_empty() { String::new() } else { format!(" ({})", self.backend_note) };
        writeln!(out, "backend      {}{note}", self.backend)?;
        match f.abs_bound {
            Some(abs) => writeln!(out, "bound        {} {:e} (absolute {})", f.error_mode, f.error_bound, num(abs))?,
            None if f.stored_raw => {
                writeln!(out, "bound        {} {:e} requested; values are exact", f.error_mode, f.error_bound)?
            }
            None => writeln!(out, "bound        none (lossless pipeline)")?,
        }
        writeln!(
            out,
            "size         {} -> {} bytes, ratio {}, {} bits/value",
            f.original_bytes,
            f.compressed_bytes,
            num(f.ratio),
            num(f.bits_per_value)
        )?;
        for (what, seconds) in [("compress  ", self.compress_seconds), ("decompress", self.decompress_seconds)] {
            if let Some(s) = seconds {
                let speed = gbps(f.original_bytes, Some(s)).map_or("-".into(), num);
                writeln!(out, "{what}   {} s, {speed} GB/s", num(s))?;
            }
        }
        if let Some((q, verdict)) = &self.quality {
            self.write_quality(q, verdict, out)?;
        }
        Ok(())
    }

    fn write_quality(&self, q: &Quality, verdict: &Verdict, out: &mut String) -> std::fmt::Result {
        if q.value_min <= q.value_max {
            let (lo, hi) = (num(q.value_min), num(q.value_max));
            writeln!(out, "value range  {lo} .. {hi} (range {})", num(q.value_range()))?;
        } else {
            writeln!(out, "value range  none (no finite values)")?;
        }
        let judged = if verdict.within_bound() { "within bound" } else { "BOUND VIOLATED" };
        let at = position(q.max_error_index, &self.shape());
        writeln!(out, "max error    {} at {at:?}, {judged}", num(q.max_abs_error))?;
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

    /// The JSON report: the shared facts of the archive and of the comparison
    /// (`fzmod::ArchiveFacts`, `fzmod::QualityFacts`: the names every front end reports), then
    /// what only a CLI run knows (tool, input, backend, timing, the error's position).
    pub fn to_json(&self) -> Result<Value> {
        let mut m = Map::new();
        m.insert("tool".into(), json!({"name": "fzmod", "version": env!("CARGO_PKG_VERSION")}));
        m.append(&mut fields(serde_json::to_value(&self.facts)?)?);
        if let Some((q, verdict)) = &self.quality {
            m.append(&mut fields(serde_json::to_value(QualityFacts::of(q, verdict))?)?);
            m.insert("max_error_position".into(), json!(position(q.max_error_index, &self.shape())));
        }
        m.insert("input".into(), json!(self.input));
        m.insert("backend".into(), json!(self.backend));
        m.insert("backend_note".into(), json!(self.backend_note));
        m.insert("compress_seconds".into(), json!(self.compress_seconds));
        m.insert("decompress_seconds".into(), json!(self.decompress_seconds));
        let total = self.compress_seconds.unwrap_or(0.0) + self.decompress_seconds.unwrap_or(0.0);
        m.insert("compress_plus_decompress_seconds".into(), json!(total));
        m.insert("compress_gbps".into(), json!(gbps(self.facts.original_bytes, self.compress_seconds)));
        m.insert("decompress_gbps".into(), json!(gbps(self.facts.original_bytes, self.decompress_seconds)));
        Ok(Value::Object(m))
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
}
