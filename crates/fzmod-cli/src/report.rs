//! The run report: printed for humans with --report, written as JSON with --json.

use fzmod::{Header, Quality};
use serde_json::{json, Map, Value};

/// Everything a compress/decompress run measured.
#[derive(Default)]
pub struct Report {
    pub input: String,
    pub dtype: String,
    pub shape: Vec<u64>,
    pub preset: String,
    pub pipeline: Vec<(String, String)>,
    pub backend: String,
    pub backend_note: String,
    pub error_mode: String,
    pub error_bound: f64,
    pub error_bound_abs: Option<f64>,
    pub original_bytes: u64,
    pub compressed_bytes: u64,
    pub compress_seconds: Option<f64>,
    pub decompress_seconds: Option<f64>,
    pub quality: Option<Quality>,
}

fn gbps(bytes: u64, seconds: Option<f64>) -> Option<f64> {
    seconds.filter(|&s| s > 0.0).map(|s| bytes as f64 / s / 1e9)
}

impl Report {
    pub fn from_header(h: &Header) -> Report {
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
            error_mode: h.error_mode.name().into(),
            error_bound: h.error_bound,
            error_bound_abs: fzmod::archived_abs_bound(h),
            original_bytes: h.num_elements().unwrap_or(0) * h.dtype.size() as u64,
            ..Report::default()
        }
    }

    pub fn ratio(&self) -> f64 {
        self.original_bytes as f64 / self.compressed_bytes.max(1) as f64
    }

    pub fn print(&self) {
        let shape: Vec<String> = self.shape.iter().map(|d| d.to_string()).collect();
        let stages: Vec<String> = self.pipeline.iter().map(|(n, t)| format!("{n}:{t}")).collect();
        println!("input        {} ({} {})", self.input, self.dtype, shape.join("x"));
        println!(
            "pipeline     {} [{}]",
            if self.preset.is_empty() { "custom" } else { &self.preset },
            stages.join(" -> ")
        );
        println!(
            "backend      {}{}",
            self.backend,
            if self.backend_note.is_empty() { String::new() } else { format!(" ({})", self.backend_note) }
        );
        match self.error_bound_abs {
            Some(abs) => println!("bound        {} {:e} (absolute {abs:e})", self.error_mode, self.error_bound),
            None => println!("bound        none (lossless pipeline)"),
        }
        println!("size         {} -> {} bytes, ratio {:.4}", self.original_bytes, self.compressed_bytes, self.ratio());
        if let Some(s) = self.compress_seconds {
            println!("compress     {:.4} s, {:.3} GB/s", s, gbps(self.original_bytes, Some(s)).unwrap_or(0.0));
        }
        if let Some(s) = self.decompress_seconds {
            println!("decompress   {:.4} s, {:.3} GB/s", s, gbps(self.original_bytes, Some(s)).unwrap_or(0.0));
        }
        if let Some(q) = &self.quality {
            println!("value range  {:e} .. {:e} (range {:e})", q.value_min, q.value_max, q.value_range());
            let verdict = match self.error_bound_abs {
                Some(abs) if q.max_abs_error <= abs && q.special_mismatches == 0 => "within bound",
                Some(_) => "BOUND VIOLATED",
                None => "",
            };
            println!("max error    {:e} at element {} {verdict}", q.max_abs_error, q.max_error_index);
            println!("PSNR         {:.3} dB, NRMSE {:e}", q.psnr_db, q.nrmse);
            if q.special_mismatches > 0 {
                println!("NaN/Inf      {} values did not come back bit-identical", q.special_mismatches);
            }
        }
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
        m.insert("backend".into(), json!(self.backend));
        m.insert("backend_note".into(), json!(self.backend_note));
        m.insert("error_mode".into(), json!(self.error_mode));
        m.insert("error_bound".into(), json!(self.error_bound));
        m.insert("error_bound_abs".into(), json!(self.error_bound_abs));
        m.insert("original_bytes".into(), json!(self.original_bytes));
        m.insert("compressed_bytes".into(), json!(self.compressed_bytes));
        m.insert("ratio".into(), json!(self.ratio()));
        m.insert("compress_seconds".into(), json!(self.compress_seconds));
        m.insert("decompress_seconds".into(), json!(self.decompress_seconds));
        m.insert("seconds".into(), json!(self.compress_seconds.or(self.decompress_seconds)));
        m.insert("compress_gbps".into(), json!(gbps(self.original_bytes, self.compress_seconds)));
        m.insert("decompress_gbps".into(), json!(gbps(self.original_bytes, self.decompress_seconds)));
        if let Some(q) = &self.quality {
            m.insert("value_min".into(), json!(q.value_min));
            m.insert("value_max".into(), json!(q.value_max));
            m.insert("max_abs_error".into(), json!(q.max_abs_error));
            m.insert("max_error_index".into(), json!(q.max_error_index));
            m.insert("psnr_db".into(), json!(q.psnr_db));
            m.insert("nrmse".into(), json!(q.nrmse));
            m.insert("special_value_mismatches".into(), json!(q.special_mismatches));
            m.insert(
                "within_bound".into(),
                json!(self.error_bound_abs.map(|b| q.max_abs_error <= b && q.special_mismatches == 0)),
            );
        }
        Value::Object(m)
    }
}
