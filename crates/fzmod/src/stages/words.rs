//! Integer words for the lossless transforms (Difference, Zigzag, Negabinary): every integer
//! buffer is handled as the unsigned bit pattern of its width, so one wrapping implementation
//! serves signed and unsigned ports alike and the arithmetic never overflows.

use crate::element::{Buffer, DType};

/// An unsigned word and the per-element maps of LC / PFPL, as pure functions.
pub trait Word: Copy + Default + Send + Sync + Eq + bytemuck::Zeroable + 'static {
    fn wrapping_add(self, o: Self) -> Self;
    fn wrapping_sub(self, o: Self) -> Self;
    /// LC's TCMS of the two's-complement value: `(v << 1) ^ (v >> (bits − 1))`.
    fn zigzag(self) -> Self;
    fn unzigzag(self) -> Self;
    /// Base −2 digits of the two's-complement value: `(v + 0xAA…A) ^ 0xAA…A`.
    fn negabinary(self) -> Self;
    fn unnegabinary(self) -> Self;
    /// The words as u32 where they are u32 (for vector forms written for that width).
    fn as_u32s(words: &mut [Self]) -> Option<&mut [u32]>;
}

macro_rules! impl_word {
    ($u:ty, $i:ty, $mask:expr, $as_u32s:expr) => {
        impl Word for $u {
            #[inline]
            fn wrapping_add(self, o: Self) -> Self {
                <$u>::wrapping_add(self, o)
            }
            #[inline]
            fn wrapping_sub(self, o: Self) -> Self {
                <$u>::wrapping_sub(self, o)
            }
            #[inline]
            fn zigzag(self) -> Self {
                (self << 1) ^ ((self as $i) >> (<$u>::BITS - 1)) as $u
            }
            #[inline]
            fn unzigzag(self) -> Self {
                (self >> 1) ^ (self & 1).wrapping_neg()
            }
            #[inline]
            fn negabinary(self) -> Self {
                self.wrapping_add($mask) ^ $mask
            }
            #[inline]
            fn unnegabinary(self) -> Self {
                (self ^ $mask).wrapping_sub($mask)
            }
            fn as_u32s(words: &mut [Self]) -> Option<&mut [u32]> {
                $as_u32s(words)
            }
        }
    };
}
impl_word!(u16, i16, 0xaaaa, |_| None);
impl_word!(u32, i32, 0xaaaa_aaaa, Some);

/// An integer buffer as unsigned words of its width.
pub enum Words {
    W16(Vec<u16>),
    W32(Vec<u32>),
}

/// The integer element types the word transforms accept.
pub const INTEGER_TYPES: [DType; 4] = [DType::I16, DType::U16, DType::I32, DType::U32];

/// The unsigned type of the same width.
pub fn unsigned_of(d: DType) -> DType {
    match d {
        DType::I16 | DType::U16 => DType::U16,
        _ => DType::U32,
    }
}

impl Words {
    /// Reinterpret an integer buffer (no copy for unsigned ones); `None` for other types.
    pub fn from_buffer(b: Buffer) -> Option<Words> {
        match b {
            Buffer::U16(v) => Some(Words::W16(v)),
            Buffer::I16(v) => Some(Words::W16(bytemuck::cast_vec(v))),
            Buffer::U32(v) => Some(Words::W32(v)),
            Buffer::I32(v) => Some(Words::W32(bytemuck::cast_vec(v))),
            _ => None,
        }
    }

    /// Back to a buffer of `dtype` (one of [`INTEGER_TYPES`] of the same width).
    pub fn into_buffer(self, dtype: DType) -> Buffer {
        match (self, dtype) {
            (Words::W16(v), DType::I16) => Buffer::I16(bytemuck::cast_vec(v)),
            (Words::W16(v), _) => Buffer::U16(v),
            (Words::W32(v), DType::I32) => Buffer::I32(bytemuck::cast_vec(v)),
            (Words::W32(v), _) => Buffer::U32(v),
        }
    }
}

/// Apply `f` to every word of `w` (any order: the map is per element).
pub fn map_words(w: Words, f16: impl Fn(u16) -> u16 + Sync, f32: impl Fn(u32) -> u32 + Sync) -> Words {
    use rayon::prelude::*;
    match w {
        Words::W16(mut v) => {
            v.par_iter_mut().for_each(|x| *x = f16(*x));
            Words::W16(v)
        }
        Words::W32(mut v) => {
            v.par_iter_mut().for_each(|x| *x = f32(*x));
            Words::W32(v)
        }
    }
}

/// The word maps on the device (words.cu): Zigzag and Negabinary launch them as they are,
/// Difference compiles words.cu in front of its own kernels.
#[cfg(feature = "cuda")]
pub(crate) mod device {
    use crate::backend::cuda::device::{grid, DeviceBuffer, DeviceRun, THREADS};
    use crate::backend::cuda::{device_error, Program};
    use crate::element::DType;
    use crate::error::Result;
    use cudarc::driver::PushKernelArg;

    /// Map codes of words.cu (`WMAP_*`), the same numbers Difference records.
    pub(crate) const NEGABINARY: u32 = 1;
    pub(crate) const ZIGZAG: u32 = 2;

    /// words.cu, one static so that a fused region includes it once.
    pub(crate) static SOURCE: &str = include_str!("words.cu");

    pub(crate) fn program() -> Program {
        Program::new(SOURCE, String::new())
    }

    /// A fresh buffer of `out_type` holding `map(input)`, or its inverse when `undo`.
    pub(crate) fn map(
        run: &DeviceRun,
        input: &DeviceBuffer,
        out_type: DType,
        op: u32,
        undo: bool,
    ) -> Result<DeviceBuffer> {
        let n = input.known_len()? as u64;
        let out = run.alloc(out_type, n as usize)?;
        let f = run.kernel(&program(), "w_map")?;
        let s = run.stream();
        let (bits, undo) = (8 * input.dtype.size() as u32, u32::from(undo));
        // SAFETY: argument list matches words.cu; both buffers hold n words of `bits`.
        unsafe {
            s.launch_builder(&f)
                .arg(&input.ptr(s))
                .arg(&out.ptr(s))
                .arg(&n)
                .arg(&bits)
                .arg(&op)
                .arg(&undo)
                .launch(grid(n, u64::from(THREADS)))
                .map_err(device_error)?;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn maps_invert(a in any::<u32>(), b in any::<u16>()) {
            prop_assert_eq!(a.zigzag().unzigzag(), a);
            prop_assert_eq!(a.negabinary().unnegabinary(), a);
            prop_assert_eq!(b.zigzag().unzigzag(), b);
            prop_assert_eq!(b.negabinary().unnegabinary(), b);
        }
    }

    /// An integer buffer of `dtype` from random bits.
    fn buffer(dtype: DType, bits: &[u32]) -> Buffer {
        match dtype {
            DType::I16 => Buffer::I16(bits.iter().map(|&b| b as i16).collect()),
            DType::U16 => Buffer::U16(bits.iter().map(|&b| b as u16).collect()),
            DType::I32 => Buffer::I32(bits.iter().map(|&b| b as i32).collect()),
            _ => Buffer::U32(bits.to_vec()),
        }
    }

    proptest! {
        /// Zigzag, Negabinary and Difference through the Stage API: forward, record, rebuild
        /// from the record, inverse — for every integer type, size and chunk.
        #[test]
        fn word_stages_round_trip_through_their_records(
            bits in prop::collection::vec(any::<u32>(), 0..2000), t in 0usize..4, chunk in 0u32..200, m in 0usize..3,
        ) {
            use crate::stage::{ForwardContext, Stage};
            use crate::stages::difference;
            use crate::stages::word_map::{Map, WordMap, NEGABINARY, ZIGZAG};
            let dtype = INTEGER_TYPES[t];
            let map = ["none", "negabinary", "zigzag"][m];
            let stages: Vec<(Box<dyn Stage>, &crate::stage::StageKind)> = vec![
                (Box::new(WordMap::new(Map::Zigzag, dtype).unwrap()), &ZIGZAG),
                (Box::new(WordMap::new(Map::Negabinary, dtype).unwrap()), &NEGABINARY),
                (
                    (difference::KIND.from_toml)(&toml::toml! {
                        input_type = (dtype.toml_name()) chunk_size = (i64::from(chunk) * dtype.size() as i64)
                        fusion_mode = map
                    }).unwrap(),
                    &difference::KIND,
                ),
            ];
            let input = buffer(dtype, &bits);
            for (stage, kind) in stages {
                let f = stage.forward(vec![input.clone()], &ForwardContext { shape: &[bits.len()] }).unwrap();
                prop_assert_eq!(f.outputs[0].dtype(), stage.outputs()[0].dtype);
                let rebuilt = (kind.from_record)(kind.param_version, &f.record).unwrap();
                prop_assert_eq!(rebuilt.inverse(f.outputs).unwrap(), vec![input.clone()]);
            }
        }
    }

    #[test]
    fn small_magnitudes_give_small_words() {
        assert_eq!([0u32, 1, (-1i32) as u32, 2].map(Word::zigzag), [0, 2, 1, 4]);
        // Base −2: 1 = 1, −1 = 11, 2 = 110, −2 = 10.
        assert_eq!([0u32, 1, (-1i32) as u32, 2, (-2i32) as u32].map(Word::negabinary), [0, 1, 3, 6, 2]);
        assert_eq!(((-1i16) as u16).negabinary(), 3);
    }
}
