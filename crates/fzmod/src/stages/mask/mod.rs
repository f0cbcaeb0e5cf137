//! Mask: land or missing points (NaN, optionally ±Inf, and/or an exact fill value) are
//! filled in place with a neighbouring valid value, so that a predictor after the stage sees a
//! smooth field and a quantizer's relative bound spans only the valid values; the mask itself
//! goes to a small segment of run lengths, and the inverse puts every masked value back bit
//! for bit.
//!
//! Forward: `f32|f64[n]` → `values: f32|f64[n]` (same type and length), `mask: u8[]`.
//! Layout: docs/FORMAT.md, "Mask".

pub(crate) mod cpu;
#[cfg(feature = "cuda")]
pub(crate) mod device;

use crate::archive::{Header, Reader, Writer};
use crate::element::{Buffer, DType, View};
use crate::error::{corrupt, Error, Result};
use crate::params::TomlParams;
use crate::stage::{self, ForwardContext, Forwarded, Port, Stage, StageKind};
use crate::stages::quantizer::check_stated_input;
use cpu::MaskFloat;

/// Registry entry (fzmod's own id).
pub static KIND: StageKind = StageKind {
    id: 43,
    name: "Mask",
    summary:
        "masks NaN / ±Inf / a fill value: fills them from a neighbour, run-length codes the mask, restores bit for bit",
    param_version: 1,
    from_toml: Mask::from_toml,
    from_record: Mask::from_record,
};

/// Record flag bits.
const FLAG_NAN: u8 = 1;
const FLAG_INF: u8 = 2;
const FLAG_FILL: u8 = 4;

/// Which elements are masked, with the fill as raw bits of the element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Predicate {
    pub nan: bool,
    pub inf: bool,
    pub fill: Option<u64>,
}

impl Predicate {
    /// The record's flag byte (device.cu's `flags` too).
    pub fn flags(&self) -> u8 {
        let bit = |on: bool, flag: u8| if on { flag } else { 0 };
        bit(self.nan, FLAG_NAN) | bit(self.inf, FLAG_INF) | bit(self.fill.is_some(), FLAG_FILL)
    }
}

/// Values a decode needs that only exist after the forward run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decoded {
    pub num_elements: u64,
    pub num_runs: u64,
    pub restore: u64,
}

/// The Mask stage.
#[derive(Clone, Debug)]
pub struct Mask {
    pub input: DType,
    pub nan: bool,
    pub inf: bool,
    /// The fill value as given; matched as the element type's nearest value, bit for bit.
    pub fill: Option<f64>,
    /// The TOML stated `input_type` (data of the other type is then refused).
    pub input_stated: bool,
    pub decoded: Option<Decoded>,
}

impl Mask {
    pub fn new(input: DType, nan: bool, inf: bool, fill: Option<f64>) -> Result<Self> {
        if !matches!(input, DType::F32 | DType::F64) {
            return Err(Error::InvalidArgument(format!("Mask input must be f32 or f64, not {input}")));
        }
        if let Some(v) = fill {
            // NaN is masked by `nan`; a finite fill that overflows the type would match an
            // infinity the user did not name.
            let fits = match input {
                DType::F32 => (v as f32).is_infinite() == v.is_infinite(),
                _ => true,
            };
            if v.is_nan() || !fits {
                return Err(Error::InvalidArgument(format!(
                    "Mask fill_value {v} is not a {input} number (NaN is masked by nan = true)"
                )));
            }
        }
        Ok(Mask { input, nan, inf, fill, input_stated: false, decoded: None })
    }

    fn from_toml(t: &toml::Table) -> Result<Box<dyn Stage>> {
        let p = TomlParams::new(t, "Mask");
        let input = p.dtype("input_type", DType::F32, &[DType::F32, DType::F64])?;
        let nan = p.bool("nan", true)?;
        let inf = p.bool("inf", false)?;
        let fill = p.f64("fill_value")?;
        p.finish()?;
        let mask = Mask::new(input, nan, inf, fill).map_err(|e| Error::Config(e.to_string()))?;
        Ok(Box::new(Mask { input_stated: t.contains_key("input_type"), ..mask }))
    }

    fn from_record(version: u32, bytes: &[u8]) -> Result<Box<dyn Stage>> {
        stage::check_param_version(&KIND, version)?;
        let mut r = Reader::new(bytes, "Mask parameters");
        let code = r.u8()?;
        let input = DType::from_code(code).filter(|d| matches!(d, DType::F32 | DType::F64));
        let input = input.ok_or_else(|| corrupt!("Mask input type code {code}"))?;
        let flags = r.u8()?;
        if flags & !(FLAG_NAN | FLAG_INF | FLAG_FILL) != 0 {
            return Err(corrupt!("Mask flags {flags:#x}"));
        }
        let fill = if flags & FLAG_FILL != 0 { Some(value_of(input, read_bits(&mut r, input)?)) } else { None };
        let num_elements = r.varint()?;
        let num_runs = r.varint()?;
        let restore = read_bits(&mut r, input)?;
        r.finish()?;
        // Runs alternate from an unmasked one; only the first may be empty.
        if num_runs == 0 || num_runs > num_elements.saturating_add(1) {
            return Err(corrupt!("Mask: {num_runs} runs over {num_elements} elements"));
        }
        let mask = Mask::new(input, flags & FLAG_NAN != 0, flags & FLAG_INF != 0, fill).map_err(|e| corrupt!("{e}"))?;
        Ok(Box::new(Mask { input_stated: true, decoded: Some(Decoded { num_elements, num_runs, restore }), ..mask }))
    }

    /// The masking test on raw bits of the input type.
    pub fn predicate(&self) -> Predicate {
        let fill = self.fill.map(|v| match self.input {
            DType::F32 => u64::from((v as f32).to_bits()),
            _ => v.to_bits(),
        });
        Predicate { nan: self.nan, inf: self.inf, fill }
    }

    /// The parameter record (docs/FORMAT.md 6.16); shared by every backend.
    pub(crate) fn record(&self, d: &Decoded) -> Vec<u8> {
        let p = self.predicate();
        let mut w = Writer::default();
        w.u8(self.input.code());
        w.u8(p.flags());
        let bytes = self.input.size();
        if let Some(bits) = p.fill {
            w.bytes.extend_from_slice(&bits.to_le_bytes()[..bytes]);
        }
        w.varint(d.num_elements);
        w.varint(d.num_runs);
        w.bytes.extend_from_slice(&d.restore.to_le_bytes()[..bytes]);
        w.bytes
    }

    fn run_forward<T: MaskFloat>(&self, mut x: Vec<T>, wrap: fn(Vec<T>) -> Buffer) -> Forwarded {
        let coded = cpu::forward(&mut x, &self.predicate());
        let d = Decoded { num_elements: x.len() as u64, num_runs: coded.num_runs, restore: coded.restore };
        Forwarded { outputs: vec![wrap(x), Buffer::U8(coded.segment)], record: self.record(&d) }
    }

    /// [`Stage::forward_unchanged`] of `x`: the record and the mask segment when nothing in
    /// `x` is masked.
    fn run_unchanged<T: MaskFloat>(&self, x: &[T]) -> Option<Forwarded> {
        let coded = cpu::nothing_masked(x, &self.predicate())?;
        let d = Decoded { num_elements: x.len() as u64, num_runs: coded.num_runs, restore: coded.restore };
        Some(Forwarded { outputs: vec![Buffer::U8(coded.segment)], record: self.record(&d) })
    }

    fn run_inverse<T: MaskFloat>(&self, x: &mut [T], segment: &[u8], d: &Decoded) -> Result<()> {
        let parsed = cpu::parse::<T>(segment, d.num_elements, d.num_runs, d.restore, &self.predicate())?;
        cpu::inverse(x, &parsed, d.restore);
        Ok(())
    }
}

/// Raw bits of the input type from a record.
fn read_bits(r: &mut Reader, input: DType) -> Result<u64> {
    let mut word = [0u8; 8];
    word[..input.size()].copy_from_slice(r.take(input.size())?);
    Ok(u64::from_le_bytes(word))
}

/// The value of raw bits of the input type, as f64 (exact).
fn value_of(input: DType, bits: u64) -> f64 {
    match input {
        DType::F32 => f64::from(f32::from_bits(bits as u32)),
        _ => f64::from_bits(bits),
    }
}

impl Stage for Mask {
    fn kind(&self) -> &'static StageKind {
        &KIND
    }
    fn inputs(&self) -> Vec<Port> {
        vec![Port { name: "input", dtype: self.input }]
    }
    fn outputs(&self) -> Vec<Port> {
        vec![Port { name: "values", dtype: self.input }, Port { name: "mask", dtype: DType::U8 }]
    }

    fn forward(&self, inputs: Vec<Buffer>, _ctx: &ForwardContext) -> Result<Forwarded> {
        stage::expect_buffers(self, &self.inputs(), &inputs)?;
        // The input is handed over: the fills are written into its memory.
        Ok(match inputs.into_iter().next() {
            Some(Buffer::F32(x)) => self.run_forward(x, Buffer::F32),
            Some(Buffer::F64(x)) => self.run_forward(x, Buffer::F64),
            _ => unreachable!("checked by expect_buffers"),
        })
    }

    fn forward_unchanged(&self, input: View, _ctx: &ForwardContext) -> Result<Option<Forwarded>> {
        Ok(match (input.typed::<f32>(), input.typed::<f64>()) {
            (Some(x), _) if self.input == DType::F32 => self.run_unchanged(x),
            (_, Some(x)) if self.input == DType::F64 => self.run_unchanged(x),
            _ => None,
        })
    }

    fn inverse(&self, outputs: Vec<Buffer>) -> Result<Vec<Buffer>> {
        let d = self.decoded.ok_or_else(|| Error::Pipeline("Mask inverse needs a decoded record".into()))?;
        stage::expect_buffers(self, &self.outputs(), &outputs)?;
        if outputs[0].len() as u64 != d.num_elements {
            return Err(corrupt!("Mask: {} values for {} elements", outputs[0].len(), d.num_elements));
        }
        let mut outputs = outputs.into_iter();
        let (mut values, mask) = (outputs.next().expect("checked"), outputs.next().expect("checked"));
        let Buffer::U8(segment) = mask else { unreachable!("checked by expect_buffers") };
        match &mut values {
            Buffer::F32(x) => self.run_inverse(x, &segment, &d)?,
            Buffer::F64(x) => self.run_inverse(x, &segment, &d)?,
            _ => unreachable!("checked by expect_buffers"),
        }
        Ok(vec![values])
    }

    fn to_toml(&self) -> toml::Table {
        let mut t = toml::Table::new();
        if self.input_stated {
            t.insert("input_type".into(), self.input.toml_name().into());
        }
        t.insert("nan".into(), self.nan.into());
        t.insert("inf".into(), self.inf.into());
        if let Some(v) = self.fill {
            t.insert("fill_value".into(), v.into());
        }
        t
    }

    fn set_input_dtype(&mut self, dtype: DType) -> Result<()> {
        check_stated_input("Mask", self.input_stated, self.input, dtype)?;
        *self = Mask { input_stated: self.input_stated, ..Mask::new(dtype, self.nan, self.inf, self.fill)? };
        Ok(())
    }

    fn check_header(&self, header: &Header) -> Result<()> {
        let d = self.decoded.ok_or_else(|| corrupt!("Mask record incomplete"))?;
        if header.dtype != self.input || header.num_elements().ok() != Some(d.num_elements) {
            return Err(corrupt!(
                "Mask covers {} {} elements, the header says {} of shape {:?}",
                d.num_elements,
                self.input,
                header.dtype,
                header.shape
            ));
        }
        Ok(())
    }

    #[cfg(feature = "cuda")]
    fn device(&self) -> Option<&dyn crate::backend::cuda::device::DeviceStage> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(toml: &str) -> Result<Box<dyn Stage>> {
        (KIND.from_toml)(&toml.parse::<toml::Table>().unwrap())
    }

    #[test]
    fn toml_keys_and_defaults() {
        let s = stage("fill_value = -1e10").unwrap();
        let t = s.to_toml();
        assert_eq!(t.get("nan").and_then(|v| v.as_bool()), Some(true));
        assert_eq!(t.get("inf").and_then(|v| v.as_bool()), Some(false));
        assert!(stage("fill = 1.0").is_err(), "unknown key");
        assert!(stage("fill_value = nan").is_err(), "a NaN fill");
        assert!(stage("fill_value = 1e300").is_err(), "a fill beyond f32");
        assert!(stage("fill_value = 1e300\ninput_type = \"float64\"").is_ok());
    }

    #[test]
    fn record_round_trips_and_is_validated() {
        let x = vec![1.0f32, -1e10, -1e10, f32::NAN, 2.0];
        let mut m = Mask::new(DType::F32, true, true, Some(-1e10)).unwrap();
        let f = m.forward(vec![Buffer::F32(x.clone())], &ForwardContext { shape: &[5] }).unwrap();
        let back = Mask::from_record(1, &f.record).unwrap();
        let Buffer::F32(out) = &back.inverse(f.outputs).unwrap()[0] else { panic!() };
        assert_eq!(
            out.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            x.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
        for cut in 0..f.record.len() {
            assert!(Mask::from_record(1, &f.record[..cut]).is_err(), "record cut at {cut}");
        }
        assert!(Mask::from_record(2, &f.record).is_err(), "a newer version");
        let mut bad = f.record.clone();
        bad[1] |= 8;
        assert!(Mask::from_record(1, &bad).is_err(), "unknown flag");
        // 3 runs recorded for 5 elements are fine; 7 are not.
        let at = 2 + 4 + 1;
        assert_eq!(f.record[at], 3);
        bad = f.record.clone();
        bad[at] = 7;
        assert!(Mask::from_record(1, &bad).is_err(), "more runs than elements allow");
        m.set_input_dtype(DType::F64).unwrap();
        assert_eq!(m.predicate().fill, Some((-1e10f64).to_bits()), "the fill follows the element type");
    }
}
