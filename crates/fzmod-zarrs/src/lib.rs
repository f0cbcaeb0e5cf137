//! fzmod as a codec of [zarrs](https://zarrs.dev), the Rust Zarr library: an array-to-bytes
//! codec named `fzmod` with the same configuration as the Python package's Zarr v3 codec
//! (`fzmod.zarr.FzmodCodec`), so arrays written by either side open on the other.
//!
//! ```json
//! {"name": "fzmod", "configuration": {"version": 1, "preset": "cuszp2", "mode": "rel",
//!  "bound": 0.001, "backend": "auto", "pipeline": "<optional TOML pipeline>"}}
//! ```
//!
//! The bound follows the library's one policy (`fzmod::ErrorBound::from_parts`): a bound
//! alone is relative, a mode alone needs the preset's or pipeline's bound to have that mode.
//! The codec writes back the bound it resolved, so the metadata states the guarantee.
//!
//! Linking this crate registers the codec with zarrs (through `inventory`); use
//! [`FzmodCodec`] as an array's `array_to_bytes_codec`, alone or inside sharding. Each chunk is
//! one fzmod archive, which records the chunk's shape and type; `rel` is relative to each
//! chunk's value range.

use serde::{Deserialize, Serialize};
use std::any::Any;
use std::borrow::Cow;
use std::num::NonZeroU64;
use std::sync::Arc;
use zarrs::array::data_type::{Float32DataType, Float64DataType};
use zarrs::array::{DataType, FillValue};
use zarrs_codec::{
    ArrayBytes, ArrayBytesRaw, ArrayCodecTraits, ArrayToBytesCodecTraits, BytesRepresentation, Codec, CodecError,
    CodecMetadataOptions, CodecOptions, CodecPluginV3, CodecTraits, CodecTraitsV3, PartialDecoderCapability,
    PartialEncoderCapability, RecommendedConcurrency,
};
use zarrs_metadata::v3::MetadataV3;
use zarrs_metadata::{Configuration, ConfigurationSerialize};
use zarrs_plugin::{PluginCreateError, ZarrVersion};

zarrs_plugin::impl_extension_aliases!(FzmodCodec, v3: "fzmod");

inventory::submit! {
    CodecPluginV3::new::<FzmodCodec>()
}

/// The version of [`FzmodCodecConfiguration`] this build reads and writes. Arrays written
/// before the field existed carry none: they are version 1.
pub const CONFIGURATION_VERSION: u32 = 1;

/// The codec's configuration in array metadata, as the Python package writes it. Unknown
/// fields and other versions are refused: a setting this build would ignore could change
/// what the array's values mean.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FzmodCodecConfiguration {
    #[serde(default = "version_1")]
    pub version: u32,
    #[serde(default = "default_preset")]
    pub preset: String,
    /// `abs` or `rel`; with neither mode nor bound, the preset's (or pipeline's) own bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<f64>,
    #[serde(default = "default_backend")]
    pub backend: String,
    /// A TOML pipeline that replaces the preset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline: Option<String>,
    /// Mask NaN (a Mask stage in front of the pipeline, docs/FORMAT.md 6.16). Default true;
    /// written only when false.
    #[serde(default = "yes", skip_serializing_if = "is_yes")]
    pub mask_nan: bool,
    /// Which fill value to mask: `"array"` (the default, not written) the array's own unless
    /// it is zero; a number (or `"NaN"`, `"Infinity"`, `"-Infinity"`); `null` none.
    #[serde(default = "array_fill", skip_serializing_if = "is_array_fill")]
    pub fill_value: Option<FillSetting>,
}

/// A `fill_value` setting other than `null`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FillSetting {
    Number(f64),
    /// `"array"`, `"NaN"`, `"Infinity"` or `"-Infinity"`.
    Name(String),
}

/// The `fill_value` setting that takes the array's fill value.
pub const ARRAY_FILL: &str = "array";

fn yes() -> bool {
    true
}
fn is_yes(v: &bool) -> bool {
    *v
}
fn array_fill() -> Option<FillSetting> {
    Some(FillSetting::Name(ARRAY_FILL.into()))
}
fn is_array_fill(v: &Option<FillSetting>) -> bool {
    *v == array_fill()
}

impl FillSetting {
    /// The number named, `None` for `"array"`; an unknown name is an error.
    fn number(&self) -> Result<Option<f64>, String> {
        match self {
            FillSetting::Number(v) => Ok(Some(*v)),
            FillSetting::Name(n) => match n.as_str() {
                ARRAY_FILL => Ok(None),
                "NaN" => Ok(Some(f64::NAN)),
                "Infinity" => Ok(Some(f64::INFINITY)),
                "-Infinity" => Ok(Some(f64::NEG_INFINITY)),
                other => Err(format!(
                    "fzmod: fill_value must be a number, \"array\", null, \"NaN\", \"Infinity\" or \"-Infinity\", not {other:?}"
                )),
            },
        }
    }
}

fn version_1() -> u32 {
    1
}
fn default_preset() -> String {
    fzmod::DEFAULT_PRESET.into()
}
fn default_backend() -> String {
    fzmod::backend::BackendChoice::Auto.name().into()
}

impl Default for FzmodCodecConfiguration {
    fn default() -> Self {
        Self {
            version: CONFIGURATION_VERSION,
            preset: default_preset(),
            mode: None,
            bound: None,
            backend: default_backend(),
            pipeline: None,
            mask_nan: true,
            fill_value: array_fill(),
        }
    }
}

impl ConfigurationSerialize for FzmodCodecConfiguration {}

/// The `fzmod` array-to-bytes codec.
#[derive(Clone, Debug)]
pub struct FzmodCodec {
    configuration: FzmodCodecConfiguration,
    /// `None`: a pipeline without a bound (lossless), which runs as written.
    bound: Option<fzmod::ErrorBound>,
    backend: fzmod::backend::BackendChoice,
}

impl FzmodCodec {
    /// A codec for `configuration`, checked now (version, preset or pipeline, bound, backend)
    /// so that a bad configuration fails when the array is opened, not at the first chunk.
    pub fn new(mut configuration: FzmodCodecConfiguration) -> Result<Self, PluginCreateError> {
        if configuration.version != CONFIGURATION_VERSION {
            return Err(format!(
                "fzmod: codec configuration version {} is not supported (this build reads {CONFIGURATION_VERSION})",
                configuration.version
            )
            .into());
        }
        if let Some(fill) = &configuration.fill_value {
            fill.number()?;
        }
        let mode = configuration.mode.as_deref().map(str::parse::<fzmod::ErrorMode>).transpose();
        let backend = configuration.backend.parse().map_err(|e: fzmod::Error| e.to_string())?;
        let unbound = Self { configuration: configuration.clone(), bound: None, backend };
        let own = unbound.pipeline(&[1]).map_err(|e| e.to_string())?.error_bound();
        let bound = fzmod::ErrorBound::from_parts(mode.map_err(|e| e.to_string())?, configuration.bound, own)
            .map_err(|e| e.to_string())?;
        configuration.mode = bound.map(|b| b.mode.name().to_string());
        configuration.bound = bound.map(|b| b.value);
        Ok(Self { configuration, bound, backend })
    }

    /// What a chunk's Mask stage masks, given the array's fill value (`None`: not known).
    pub fn mask(&self, array_fill: Option<f64>) -> fzmod::MaskSpec {
        let fill = match &self.configuration.fill_value {
            None => None,
            Some(setting) => match setting.number() {
                Ok(Some(v)) => Some(v),
                // "array": the array's, unless zero (Zarr's default for floats, usually data).
                Ok(None) => array_fill.filter(|v| *v != 0.0),
                Err(_) => None, // refused in `new`
            },
        };
        match fill {
            Some(_) => fzmod::MaskSpec::nan_and(fill),
            None => fzmod::MaskSpec { nan: self.configuration.mask_nan, inf: false, fill: None },
        }
    }

    /// The pipeline for chunks of `shape`, at the codec's bound, masking what `mask` names.
    fn pipeline_masked(&self, shape: &[usize], mask: fzmod::MaskSpec) -> fzmod::Result<fzmod::Pipeline> {
        let pipeline = self.pipeline(shape)?;
        fzmod::with_mask(&pipeline, mask)
    }

    /// The pipeline for chunks of `shape`, at the codec's bound.
    fn pipeline(&self, shape: &[usize]) -> fzmod::Result<fzmod::Pipeline> {
        let mut pipeline = match &self.configuration.pipeline {
            Some(toml) => fzmod::from_toml(toml)?,
            None => fzmod::preset(&self.configuration.preset, shape)?,
        };
        if let Some(bound) = self.bound {
            pipeline.set_error_bound(bound)?;
        }
        Ok(pipeline)
    }

    /// The configuration written into array metadata (with the bound it resolved to).
    pub fn resolved_configuration(&self) -> &FzmodCodecConfiguration {
        &self.configuration
    }
}

/// fzmod's element type for a Zarr data type (float32 and float64 only).
fn element_type(data_type: &DataType) -> Result<fzmod::DType, CodecError> {
    if data_type.is::<Float32DataType>() {
        Ok(fzmod::DType::F32)
    } else if data_type.is::<Float64DataType>() {
        Ok(fzmod::DType::F64)
    } else {
        Err(CodecError::Other(format!("the fzmod codec takes float32 or float64 arrays, not {data_type:?}")))
    }
}

fn library_error(error: fzmod::Error) -> CodecError {
    CodecError::Other(format!("fzmod: {error}"))
}

impl CodecTraitsV3 for FzmodCodec {
    fn create(metadata: &MetadataV3) -> Result<Codec, PluginCreateError> {
        let configuration: FzmodCodecConfiguration = metadata.to_typed_configuration()?;
        Ok(Codec::ArrayToBytes(Arc::new(FzmodCodec::new(configuration)?)))
    }
}

impl CodecTraits for FzmodCodec {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn configuration(&self, _version: ZarrVersion, _options: &CodecMetadataOptions) -> Option<Configuration> {
        Some(self.configuration.clone().into())
    }

    fn partial_decoder_capability(&self) -> PartialDecoderCapability {
        PartialDecoderCapability { partial_read: false, partial_decode: false }
    }

    fn partial_encoder_capability(&self) -> PartialEncoderCapability {
        PartialEncoderCapability { partial_encode: false }
    }
}

impl ArrayCodecTraits for FzmodCodec {
    fn recommended_concurrency(
        &self,
        _shape: &[NonZeroU64],
        _data_type: &DataType,
    ) -> Result<RecommendedConcurrency, CodecError> {
        // The library spreads one chunk over its own thread pool.
        Ok(RecommendedConcurrency::new_maximum(1))
    }
}

impl ArrayToBytesCodecTraits for FzmodCodec {
    fn into_dyn(self: Arc<Self>) -> Arc<dyn ArrayToBytesCodecTraits> {
        self
    }

    fn encoded_representation(
        &self,
        _shape: &[NonZeroU64],
        _data_type: &DataType,
        _fill_value: &FillValue,
    ) -> Result<BytesRepresentation, CodecError> {
        Ok(BytesRepresentation::UnboundedSize)
    }

    fn encode<'a>(
        &self,
        bytes: ArrayBytes<'a>,
        shape: &[NonZeroU64],
        data_type: &DataType,
        fill_value: &FillValue,
        _options: &CodecOptions,
    ) -> Result<ArrayBytesRaw<'a>, CodecError> {
        let dtype = element_type(data_type)?;
        let shape: Vec<usize> = shape.iter().map(|d| d.get() as usize).collect();
        // zarrs hands native-endian elements; fzmod buffers are read as little-endian.
        let bytes = bytes.into_fixed()?;
        let data = fzmod::Buffer::from_le_bytes(dtype, &bytes).map_err(library_error)?;
        let fill = fill_value.as_ne_bytes();
        let array_fill = match dtype {
            fzmod::DType::F32 => fill.try_into().ok().map(|b| f64::from(f32::from_ne_bytes(b))),
            _ => fill.try_into().ok().map(f64::from_ne_bytes),
        };
        let mut pipeline = self.pipeline_masked(&shape, self.mask(array_fill)).map_err(library_error)?;
        pipeline.set_input_dtype(dtype).map_err(library_error)?;
        let (backend, _) = fzmod::backend::Backend::select(self.backend).map_err(library_error)?;
        let archive = pipeline.compress_on(&backend, &data, &shape).map_err(library_error)?;
        Ok(Cow::Owned(archive))
    }

    fn decode<'a>(
        &self,
        bytes: ArrayBytesRaw<'a>,
        shape: &[NonZeroU64],
        data_type: &DataType,
        _fill_value: &FillValue,
        _options: &CodecOptions,
    ) -> Result<ArrayBytes<'a>, CodecError> {
        let dtype = element_type(data_type)?;
        let (backend, _) = fzmod::backend::Backend::select(self.backend).map_err(library_error)?;
        let decoded = fzmod::decompress_on(&backend, &bytes).map_err(library_error)?;
        let expected: Vec<u64> = shape.iter().map(|d| d.get()).collect();
        if decoded.header.dtype != dtype || decoded.header.shape != expected {
            return Err(CodecError::Other(format!(
                "fzmod: chunk archive holds {} {:?}, the array expects {dtype} {expected:?}",
                decoded.header.dtype, decoded.header.shape
            )));
        }
        Ok(ArrayBytes::from(decoded.data.to_le_bytes()))
    }
}
