//! A Mask stage (docs/FORMAT.md 6.16) in front of any pipeline: what the codecs run when the
//! data carries a fill value (Zarr `fill_value`, CF `_FillValue`) or NaN land points.
//!
//! The stage that read the pipeline input reads the Mask's `values` port instead; the mask
//! itself becomes one more segment. The result is an ordinary pipeline (it round-trips
//! through [`to_toml`](super::to_toml)), so its archives decode with no knowledge of this.

use super::{from_toml, preset, to_toml, EXTERNAL};
use crate::error::{Error, Result};
use crate::graph::Pipeline;

/// Which elements a Mask stage masks (its TOML keys `nan`, `inf`, `fill_value`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MaskSpec {
    /// Mask every NaN.
    pub nan: bool,
    /// Mask +Inf and -Inf.
    pub inf: bool,
    /// Also mask this exact value (as the element type's nearest). A NaN here means `nan`.
    pub fill: Option<f64>,
}

impl MaskSpec {
    /// NaN masked, and `fill` (if any) too: what the codecs use for a data fill value.
    pub fn nan_and(fill: Option<f64>) -> Self {
        MaskSpec { nan: true, inf: false, fill }.normalized()
    }

    /// Whether this masks anything at all.
    pub fn is_empty(&self) -> bool {
        !self.nan && !self.inf && self.fill.is_none()
    }

    /// A NaN fill is the `nan` flag (the Mask stage refuses a NaN `fill_value`).
    fn normalized(mut self) -> Self {
        if self.fill.is_some_and(f64::is_nan) {
            self.fill = None;
            self.nan = true;
        }
        self
    }
}

/// The stage name the Mask gets: `mask`, or `mask_2`, `mask_3` … when a stage has that name.
fn free_name(stages: &[toml::Value]) -> String {
    let taken = |n: &str| stages.iter().any(|s| s.get("name").and_then(|v| v.as_str()) == Some(n));
    let mut name = "mask".to_string();
    let mut i = 2;
    while taken(&name) {
        name = format!("mask_{i}");
        i += 1;
    }
    name
}

/// `pipeline` with a Mask stage in front: the Mask reads the pipeline input and every input
/// that read it reads the Mask's `values` instead. An empty `mask` (nothing masked) returns
/// the pipeline unchanged. A pipeline that already starts with a Mask stage (the
/// interpolation presets mask NaN) keeps it and masks what either asks for; a second, different
/// fill value is refused. The pipeline name becomes `masked-NAME` (left empty for an unnamed
/// pipeline).
pub fn with_mask(pipeline: &Pipeline, mask: MaskSpec) -> Result<Pipeline> {
    let mask = mask.normalized();
    let text = to_toml(pipeline);
    if mask.is_empty() {
        return from_toml(&text);
    }
    let mut doc: toml::Table = text.parse().map_err(|e: toml::de::Error| Error::Config(e.to_string()))?;
    let Some(toml::Value::Array(mut stages)) = doc.remove("stage") else {
        return Err(Error::Config("pipeline without stages".into()));
    };
    let leading = stages.iter_mut().find(|s| reads_input(s) && s.get("type").and_then(|v| v.as_str()) == Some("Mask"));
    match leading.and_then(|s| s.as_table_mut()) {
        Some(existing) => merge(existing, mask)?,
        None => stages = in_front(stages, mask),
    }
    doc.insert("stage".into(), toml::Value::Array(stages));
    if !pipeline.preset.is_empty() {
        let mut p = toml::Table::new();
        p.insert("name".into(), format!("masked-{}", pipeline.preset).into());
        doc.insert("pipeline".into(), p.into());
    }
    let text = toml::to_string(&doc).map_err(|e| Error::Config(e.to_string()))?;
    from_toml(&text)
}

/// Whether a stage reads the pipeline input.
fn reads_input(stage: &toml::Value) -> bool {
    stage
        .get("inputs")
        .and_then(|v| v.as_array())
        .is_some_and(|ins| ins.iter().any(|i| i.get("from").and_then(|v| v.as_str()) == Some(EXTERNAL)))
}

/// A new Mask stage in front of `stages`, which read its `values` instead of the input.
fn in_front(stages: Vec<toml::Value>, mask: MaskSpec) -> Vec<toml::Value> {
    let name = free_name(&stages);
    let mut table = toml::Table::new();
    table.insert("name".into(), name.clone().into());
    table.insert("type".into(), "Mask".into());
    table.insert("nan".into(), mask.nan.into());
    table.insert("inf".into(), mask.inf.into());
    if let Some(fill) = mask.fill {
        table.insert("fill_value".into(), fill.into());
    }
    let mut rewired = vec![toml::Value::Table(table)];
    for mut stage in stages {
        if let Some(toml::Value::Array(inputs)) = stage.get_mut("inputs") {
            for input in inputs.iter_mut().filter_map(|i| i.as_table_mut()) {
                if input.get("from").and_then(|v| v.as_str()) == Some(EXTERNAL) {
                    input.insert("from".into(), name.clone().into());
                    input.insert("port".into(), "values".into());
                }
            }
        }
        rewired.push(stage);
    }
    rewired
}

/// Widen an existing Mask stage (its TOML table) to mask what `mask` asks for too.
fn merge(existing: &mut toml::Table, mask: MaskSpec) -> Result<()> {
    let flag = |key: &str, default: bool| existing.get(key).and_then(|v| v.as_bool()).unwrap_or(default);
    let (nan, inf) = (flag("nan", true) || mask.nan, flag("inf", false) || mask.inf);
    existing.insert("nan".into(), nan.into());
    existing.insert("inf".into(), inf.into());
    if let Some(fill) = mask.fill {
        let stated = existing.get("fill_value").and_then(|v| v.as_float().or_else(|| v.as_integer().map(|i| i as f64)));
        if let Some(v) = stated.filter(|&v| v != fill) {
            return Err(Error::InvalidArgument(format!(
                "the pipeline's Mask stage already masks the fill value {v}, not {fill}"
            )));
        }
        existing.insert("fill_value".into(), fill.into());
    }
    Ok(())
}

/// Preset `name` for `shape` with a Mask stage in front (see [`with_mask`]); e.g.
/// `masked_preset("cuszp2", &[20, 180, 360], MaskSpec::nan_and(Some(-1e10)))` is the pipeline
/// of docs/examples/masked-cuszp2.toml.
pub fn masked_preset(name: &str, shape: &[usize], mask: MaskSpec) -> Result<Pipeline> {
    with_mask(&preset(name, shape)?, mask)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Buffer, DType, ErrorBound, ErrorMode, PRESETS};

    fn levitus_like(nx: usize, ny: usize) -> Vec<f32> {
        (0..nx * ny)
            .map(|i| {
                let (y, x) = (i / nx, i % nx);
                if (20..40 + y / 2).contains(&x) || x < 5 {
                    -1e10
                } else {
                    10.0 + (x as f32 * 0.05).sin() * 5.0 + y as f32 * 0.01
                }
            })
            .collect()
    }

    #[test]
    fn example_file_equals_helper() {
        let file = from_toml(include_str!("../../../../docs/examples/masked-cuszp2.toml")).unwrap();
        let helper = masked_preset("cuszp2", &[20, 30], MaskSpec::nan_and(Some(-1e10))).unwrap();
        // Same stages, types and wiring (the file states inf = false as the helper does).
        let strip = |p: &Pipeline| to_toml(p).replace("masked-cuszp2", "");
        assert_eq!(strip(&file), strip(&helper));
    }

    #[test]
    fn every_preset_masked_round_trips_within_bound() {
        let (nx, ny) = (97, 41);
        let mut data = levitus_like(nx, ny);
        data[100] = f32::NAN;
        data[101] = f32::from_bits(0x7fc0_1234); // NaN payload kept bit for bit
        for shape in [vec![ny, nx], vec![nx * ny]] {
            for p in PRESETS {
                let mut pipeline = masked_preset(p.name, &shape, MaskSpec::nan_and(Some(-1e10))).unwrap();
                assert_eq!(pipeline.preset, format!("masked-{}", p.name));
                let b = ErrorBound { mode: ErrorMode::Rel, value: 1e-3 };
                pipeline.set_error_bound(b).unwrap();
                pipeline.set_input_dtype(DType::F32).unwrap();
                pipeline.finalize().unwrap();
                let input = Buffer::F32(data.clone());
                let archive = pipeline.compress(&input, &shape).unwrap();
                let out = crate::decompress(&archive).unwrap();
                let Buffer::F32(out) = out.data else { panic!("f32 expected") };
                // rel relative to the valid values only.
                let valid: Vec<f32> = data.iter().copied().filter(|v| v.is_finite() && *v != -1e10).collect();
                let lo = valid.iter().copied().fold(f32::INFINITY, f32::min) as f64;
                let hi = valid.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
                let bound = 1e-3 * (hi - lo);
                for (a, b) in data.iter().zip(&out) {
                    if a.is_finite() && *a != -1e10 {
                        assert!((*a as f64 - *b as f64).abs() <= bound, "{}: {a} -> {b}", p.name);
                    } else {
                        assert_eq!(a.to_bits(), b.to_bits(), "{}", p.name);
                    }
                }
                // At the same absolute bound, the mask makes the archive smaller than the
                // unmasked preset's (which sees the fill as outliers or huge codes), unless
                // that one's outlier lists took the run layout (docs/FORMAT.md 6.1.1), where a
                // land run costs a few bytes and this small field's mask may cost more.
                let mut plain = preset(p.name, &shape).unwrap();
                plain.set_error_bound(ErrorBound { mode: ErrorMode::Abs, value: bound }).unwrap();
                plain.set_input_dtype(DType::F32).unwrap();
                plain.finalize().unwrap();
                let plain = plain.compress(&input, &shape).unwrap();
                // (LorenzoQuant's 4: the run layout, its value outliers predicted.)
                let runs = matches!(crate::inspect(&plain).unwrap().stages[0].params.last(), Some(&(2 | 4)));
                assert!(runs || archive.len() < plain.len(), "{}: {} vs {}", p.name, archive.len(), plain.len());
            }
        }
    }

    #[test]
    fn f64_nan_fill_and_empty_spec() {
        let data: Vec<f64> = (0..1000).map(|i| if i % 9 == 0 { f64::NAN } else { (i as f64).sqrt() }).collect();
        // A NaN fill is the nan flag.
        let mut pipeline =
            masked_preset("mans", &[1000], MaskSpec { nan: false, inf: false, fill: Some(f64::NAN) }).unwrap();
        pipeline.set_input_dtype(DType::F64).unwrap();
        pipeline.finalize().unwrap();
        let archive = pipeline.compress(&Buffer::F64(data.clone()), &[1000]).unwrap();
        let Buffer::F64(out) = crate::decompress(&archive).unwrap().data else { panic!() };
        for (a, b) in data.iter().zip(&out) {
            assert!(if a.is_nan() { b.to_bits() == a.to_bits() } else { (a - b).abs() <= 1e-3 * 31.6 });
        }
        // Nothing to mask: the pipeline as it was.
        let plain = preset("pfpl", &[10]).unwrap();
        assert_eq!(to_toml(&with_mask(&plain, MaskSpec::default()).unwrap()), to_toml(&plain));
    }

    #[test]
    fn widens_a_leading_mask_and_renames_around_a_taken_name() {
        let masks = |p: &Pipeline| to_toml(p).matches("type = \"Mask\"").count();
        let masked = masked_preset("cuszp", &[10, 10], MaskSpec::nan_and(Some(-1e10))).unwrap();
        let again = with_mask(&masked, MaskSpec { nan: false, inf: true, fill: Some(-1e10) }).unwrap();
        assert_eq!(masks(&again), 1, "{}", to_toml(&again));
        assert!(to_toml(&again).contains("inf = true"), "{}", to_toml(&again));
        assert!(matches!(with_mask(&masked, MaskSpec::nan_and(Some(5.0))), Err(Error::InvalidArgument(_))));
        // The interpolation presets start with a NaN mask: a fill value joins it.
        let interp = masked_preset("interp", &[10, 10], MaskSpec::nan_and(Some(-1e10))).unwrap();
        assert_eq!((masks(&interp), interp.preset.as_str()), (1, "masked-interp"));
        assert!(to_toml(&interp).contains("fill_value = -1"), "{}", to_toml(&interp));
        let text = "[[stage]]\nname = \"mask\"\ntype = \"Quantizer\"\n";
        let p = with_mask(&from_toml(text).unwrap(), MaskSpec::nan_and(Some(0.0))).unwrap();
        assert!(to_toml(&p).contains("mask_2"), "{}", to_toml(&p));
    }
}
