//! TOML pipelines in the FZGPUModules schema, and the built-in presets.
//!
//! ```toml
//! [pipeline]
//! name = "my-pipeline"          # optional; recorded in archives
//! [[stage]]
//! name = "quant"                # unique
//! type = "Quantizer"            # a registry name (`fzmod stages`)
//! error_bound = 1e-3            # the stage's own keys, snake_case
//! [[stage]]
//! name = "coder"
//! type = "AdaptiveBitpack"
//! inputs = [{ from = "quant", port = "codes" }]   # port defaults to "output"
//! ```
//! A stage without `inputs` (or with `from = "__external__"`) reads the pipeline input.

mod mask;

pub use mask::{masked_preset, with_mask, MaskSpec};

use crate::error::{Error, Result};
use crate::graph::Pipeline;
use crate::shape::Grid;

/// `from` value that names the pipeline input.
pub const EXTERNAL: &str = "__external__";

/// FZGPUModules `[pipeline]` keys that tune its GPU memory planner; accepted and ignored
/// (fzmod sizes buffers itself, and the shape always comes from the caller, never the file).
const IGNORED_PIPELINE_KEYS: [&str; 7] =
    ["input_size", "dims", "memory_strategy", "pool_multiplier", "num_streams", "coloring", "primary_source"];

/// A built-in preset: name, what it reproduces, and its TOML per dimensionality.
pub struct Preset {
    pub name: &'static str,
    pub summary: &'static str,
    one_d: &'static str,
    multi_d: &'static str,
}

const CUSZP: &str = include_str!("presets/cuszp.toml");
const CUSZP2: &str = include_str!("presets/cuszp2.toml");
const FZGPU: &str = include_str!("presets/fzgpu.toml");
const PFPL: &str = include_str!("presets/pfpl.toml");
const CUSZ: &str = include_str!("presets/cusz.toml");
const INTERP: &str = include_str!("presets/interp.toml");
const INTERP_FAST: &str = include_str!("presets/interp-fast.toml");
const MANS: &str = include_str!("presets/mans.toml");

/// Every built-in preset.
pub static PRESETS: &[Preset] = &[
    Preset {
        name: "cuszp",
        summary: "cuSZp plain: Quantizer -> Lorenzo(block 32) -> AdaptiveBitpack(32)",
        one_d: CUSZP,
        multi_d: CUSZP,
    },
    Preset {
        name: "cuszp2",
        summary: "cuSZp2: cuszp + per-block outlier selection, packed 1-byte metadata",
        one_d: CUSZP2,
        multi_d: CUSZP2,
    },
    Preset {
        name: "cuszp3-fixed",
        summary: "cuSZp3 fixed: no delta; 2-D/3-D codes tiled (8x8 / 4x4x4) into 64-blocks",
        one_d: include_str!("presets/cuszp3-fixed-1d.toml"),
        multi_d: include_str!("presets/cuszp3-fixed.toml"),
    },
    Preset {
        name: "cuszp3-plain",
        summary: "cuSZp3 plain: 1-D as cuszp; 2-D/3-D TiledLorenzo -> AdaptiveBitpack(64)",
        one_d: CUSZP,
        multi_d: include_str!("presets/cuszp3-plain.toml"),
    },
    Preset {
        name: "cuszp3-outlier",
        summary: "cuSZp3 outlier: cuszp3-plain + outlier selection, packed metadata",
        one_d: CUSZP2,
        multi_d: include_str!("presets/cuszp3-outlier.toml"),
    },
    Preset {
        name: "fzgpu",
        summary: "FZ-GPU: LorenzoQuant (tiles, sign-magnitude u16) -> BitplaneRZE; strict bound",
        one_d: FZGPU,
        multi_d: FZGPU,
    },
    Preset {
        name: "pfpl",
        summary: "PFPL: inline-outlier Quantizer -> Difference(negabinary, 16 KiB) -> Bitshuffle(4) -> RZE",
        one_d: PFPL,
        multi_d: PFPL,
    },
    Preset {
        name: "cusz",
        summary: "cuSZ: LorenzoQuant (radius-512 u16 codes) -> Huffman (bklen 1024, codes <= 20 bits); strict bound",
        one_d: CUSZ,
        multi_d: CUSZ,
    },
    Preset {
        name: "mans",
        summary: "MANS: LorenzoQuant (zigzag u16) -> ADM -> ANS (dietgpu rANS, 10-bit); strict bound",
        one_d: MANS,
        multi_d: MANS,
    },
    Preset {
        name: "interp",
        summary: "NaN masked, then SZ3/cuSZ-i-style multilevel cubic interpolation (radius-2048 u16 codes, 3-D: level order) -> Huffman (bklen 4096) -> RZE; strict bound",
        one_d: INTERP,
        multi_d: INTERP,
    },
    Preset {
        name: "interp-fast",
        summary: "NaN masked, then multilevel interpolation (zigzag u16 codes, 3-D: level order) -> Bitshuffle(2) -> RZE -> ANS, no Huffman; strict bound",
        one_d: INTERP_FAST,
        multi_d: INTERP_FAST,
    },
];

/// Build a preset for a given input shape (1-D and N-D variants differ).
pub fn preset(name: &str, shape: &[usize]) -> Result<Pipeline> {
    let p = PRESETS.iter().find(|p| p.name == name).ok_or_else(|| {
        let names: Vec<_> = PRESETS.iter().map(|p| p.name).collect();
        Error::InvalidArgument(format!("unknown preset '{name}' (known: {})", names.join(", ")))
    })?;
    let text = if Grid::from_shape(shape).ndim == 1 { p.one_d } else { p.multi_d };
    let mut pipeline = from_toml(text)?;
    pipeline.preset = name.to_string();
    Ok(pipeline)
}

fn config_err(msg: String) -> Error {
    Error::Config(msg)
}

/// Parse a TOML pipeline.
pub fn from_toml(text: &str) -> Result<Pipeline> {
    let doc: toml::Table = text.parse().map_err(|e: toml::de::Error| config_err(e.to_string()))?;
    let mut pipeline = Pipeline::new();
    for (key, value) in &doc {
        match key.as_str() {
            "pipeline" => {
                let t = value.as_table().ok_or_else(|| config_err("[pipeline] must be a table".into()))?;
                for (k, v) in t {
                    match k.as_str() {
                        "name" => {
                            pipeline.preset = v
                                .as_str()
                                .ok_or_else(|| config_err("[pipeline] name must be a string".into()))?
                                .to_string()
                        }
                        k if IGNORED_PIPELINE_KEYS.contains(&k) => {}
                        k => return Err(config_err(format!("[pipeline]: unknown key '{k}'"))),
                    }
                }
            }
            "stage" => {}
            k => return Err(config_err(format!("unknown top-level key '{k}'"))),
        }
    }
    let stages = match doc.get("stage") {
        Some(toml::Value::Array(a)) => a.as_slice(),
        Some(_) => return Err(config_err("'stage' must be an array of tables ([[stage]])".into())),
        None => return Err(config_err("no [[stage]] tables".into())),
    };
    let mut wiring = Vec::new();
    for (i, s) in stages.iter().enumerate() {
        let t = s.as_table().ok_or_else(|| config_err(format!("stage #{i} is not a table")))?;
        let field = |k: &str| t.get(k).and_then(|v| v.as_str());
        let name = field("name").ok_or_else(|| config_err(format!("stage #{i} has no string 'name'")))?;
        // Names identify stages in wiring and archives (docs/FORMAT.md §2: unique).
        if name.is_empty() || wiring.iter().any(|(n, _)| n == name) {
            return Err(config_err(format!("stage #{i}: name '{name}' is empty or already used")));
        }
        let type_name = field("type").ok_or_else(|| config_err(format!("stage '{name}' has no string 'type'")))?;
        let kind = crate::stages::kind_by_name(type_name)?;
        let built = (kind.from_toml)(t).map_err(|e| config_err(format!("stage '{name}': {e}")))?;
        pipeline.add_stage(name, built)?;
        wiring.push((name.to_string(), t.get("inputs")));
    }
    for (name, inputs) in wiring {
        let Some(inputs) = inputs else {
            pipeline.connect_input(&name)?;
            continue;
        };
        let list = inputs.as_array().ok_or_else(|| config_err(format!("stage '{name}': inputs must be an array")))?;
        for input in list {
            let t = input
                .as_table()
                .ok_or_else(|| config_err(format!("stage '{name}': each input is a table {{from, port}}")))?;
            if let Some(k) = t.keys().find(|k| *k != "from" && *k != "port") {
                return Err(config_err(format!("stage '{name}': unknown input key '{k}'")));
            }
            let from = t
                .get("from")
                .and_then(|v| v.as_str())
                .ok_or_else(|| config_err(format!("stage '{name}': input without 'from'")))?;
            let port = match t.get("port") {
                None => "output",
                Some(v) => v.as_str().ok_or_else(|| config_err(format!("stage '{name}': port must be a string")))?,
            };
            if from == EXTERNAL {
                pipeline.connect_input(&name)?;
            } else {
                pipeline.connect(&name, from, port)?;
            }
        }
    }
    pipeline.finalize()?;
    Ok(pipeline)
}

/// Write a pipeline back as TOML (round-trips through [`from_toml`]).
pub fn to_toml(pipeline: &Pipeline) -> String {
    let mut doc = toml::Table::new();
    if !pipeline.preset.is_empty() {
        let mut p = toml::Table::new();
        p.insert("name".into(), pipeline.preset.clone().into());
        doc.insert("pipeline".into(), p.into());
    }
    let nodes = pipeline.nodes();
    let stages: Vec<toml::Value> = nodes
        .iter()
        .map(|n| {
            let mut t = toml::Table::new();
            t.insert("name".into(), n.name.clone().into());
            t.insert("type".into(), n.stage.kind().name.into());
            t.extend(n.stage.to_toml());
            let inputs: Vec<toml::Value> = n
                .inputs
                .iter()
                .flatten()
                .map(|r| {
                    let mut i = toml::Table::new();
                    match *r {
                        crate::archive::InputRef::External => {
                            i.insert("from".into(), EXTERNAL.into());
                        }
                        crate::archive::InputRef::Stage { stage, port } => {
                            i.insert("from".into(), nodes[stage].name.clone().into());
                            i.insert("port".into(), nodes[stage].stage.outputs()[port].name.into());
                        }
                    }
                    i.into()
                })
                .collect();
            t.insert("inputs".into(), inputs.into());
            t.into()
        })
        .collect();
    doc.insert("stage".into(), stages.into());
    toml::to_string(&doc).expect("a TOML table always serialises")
}
