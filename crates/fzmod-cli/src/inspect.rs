//! `fzmod inspect`: the header, pipeline and segment table of an archive.

use crate::report::{fields, num};
use fzmod::archive::InputRef;
use fzmod::{ArchiveFacts, Header};
use serde_json::{json, Value};

fn stage_type(id: u16) -> String {
    fzmod::stages::kind_by_id(id).map_or_else(|_| format!("unknown#{id}"), |k| k.name.to_string())
}

/// The stage's parameters as recorded (decoded through the registry), or why they cannot be.
fn parameters(st: &fzmod::archive::StageRecord) -> Result<toml::Table, String> {
    let kind = fzmod::stages::kind_by_id(st.type_id).map_err(|e| e.to_string())?;
    let stage = (kind.from_record)(st.param_version, &st.params).map_err(|e| e.to_string())?;
    Ok(stage.to_toml())
}

fn parameters_text(st: &fzmod::archive::StageRecord) -> String {
    match parameters(st) {
        Ok(t) => t.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" "),
        Err(e) => format!("(unreadable: {e})"),
    }
}

/// Name of output `port` of stage `stage` (indices when the record cannot be decoded).
/// The parser guarantees the stage exists; inspect stays total anyway, since it exists to
/// look at suspicious archives.
fn port_name(h: &Header, stage: usize, port: usize) -> String {
    let Some(st) = h.stages.get(stage) else { return format!("stage#{stage}:{port}") };
    let named = fzmod::stages::kind_by_id(st.type_id)
        .ok()
        .and_then(|k| (k.from_record)(st.param_version, &st.params).ok())
        .and_then(|s| s.outputs().get(port).map(|p| p.name.to_string()));
    format!("{}:{}", st.name, named.unwrap_or_else(|| port.to_string()))
}

fn source(h: &Header, r: &InputRef) -> String {
    match *r {
        InputRef::External => "input".into(),
        InputRef::Stage { stage, port } => port_name(h, stage, port),
    }
}

pub fn to_text(h: &Header, archive_len: usize) -> String {
    let mut s = String::new();
    let shape: Vec<String> = h.shape.iter().map(|d| d.to_string()).collect();
    s += &format!("format       {}.{}\n", h.version.0, h.version.1);
    s += &format!(
        "data         {} {} ({} bytes)\n",
        h.dtype,
        shape.join("x"),
        h.num_elements().unwrap_or(0) * h.dtype.size() as u64
    );
    s += &format!("archive      {archive_len} bytes\n");
    s += &format!("preset       {}\n", if h.preset.is_empty() { "custom" } else { &h.preset });
    s += &format!("bound        {} {:e}", h.error_mode.name(), h.error_bound);
    if let Some(abs) = fzmod::archived_abs_bound(h) {
        s += &format!(" (absolute {})", num(abs));
    }
    if fzmod::is_stored_raw(h) {
        s += "\nstored       as is (lossless fallback: the pipeline's archive was larger than the input)";
    }
    s += "\nstages\n";
    for (i, st) in h.stages.iter().enumerate() {
        let inputs: Vec<String> = st.inputs.iter().map(|r| source(h, r)).collect();
        s += &format!(
            "  {i}  {:<12} {:<16} <- {:<20} {}\n",
            st.name,
            stage_type(st.type_id),
            inputs.join(", "),
            parameters_text(st)
        );
    }
    if let Some(c) = &h.chunking {
        let shape: Vec<String> = c.chunk_shape.iter().map(u64::to_string).collect();
        s += &format!(
            "chunks       {} of {} (each its own format-1 archive; stages above: the first chunk's)\n",
            c.index.len(),
            shape.join("x")
        );
        s += &format!(
            "chunk bound  {} {:e} in every chunk\nchunk index  {}{}, {} bytes ({:.2} bits per chunk)\n",
            c.chunk_mode.name(),
            c.chunk_bound,
            c.index.class(),
            if c.streamed { " in the trailer (streamed, format 2.1)" } else { "" },
            c.index.size_bytes(),
            c.index.bits_per_block()
        );
        return s;
    }
    s += "segments\n";
    for e in &h.segments {
        s += &format!(
            "  {:<16} {:<4} {:>12} bytes at +{:<10} crc32c {:08x}\n",
            port_name(h, e.stage, e.port),
            e.dtype,
            e.len,
            e.offset,
            e.crc32c
        );
    }
    s
}

/// The archive's facts under the shared names (`fzmod::ArchiveFacts`), each stage with what
/// only inspect shows (type id, parameters, inputs), and the segment table.
pub fn to_json(h: &Header, archive_len: usize) -> anyhow::Result<Value> {
    let mut m = fields(serde_json::to_value(ArchiveFacts::of(h, archive_len))?)?;
    let stages = h
        .stages
        .iter()
        .map(|st| {
            Ok(json!({
                "name": st.name, "type": stage_type(st.type_id), "type_id": st.type_id,
                "param_version": st.param_version, "param_bytes": st.params.len(),
                "parameters": parameters(st).ok().map(serde_json::to_value).transpose()?,
                "inputs": st.inputs.iter().map(|r| source(h, r)).collect::<Vec<_>>(),
            }))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    m.insert("stages".into(), Value::Array(stages));
    let segments = h.segments.iter().map(|e| {
        json!({
            "stage": h.stages.get(e.stage).map_or("?", |st| st.name.as_str()), "port": port_name(h, e.stage, e.port),
            "dtype": e.dtype.toml_name(), "offset": e.offset, "bytes": e.len, "crc32c": format!("{:08x}", e.crc32c),
        })
    });
    m.insert("segments".into(), Value::Array(segments.collect()));
    if let Some(c) = &h.chunking {
        m.insert(
            "chunks".into(),
            json!({
                "chunk_shape": c.chunk_shape, "count": c.index.len(),
                "chunk_error_mode": c.chunk_mode.name(), "chunk_error_bound": c.chunk_bound,
                "index_class": c.index.class().name(), "index_bytes": c.index.size_bytes(),
                "streamed": c.streamed,
            }),
        );
    }
    Ok(Value::Object(m))
}
