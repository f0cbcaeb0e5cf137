//! The crate is layered without circles (docs/ARCHITECTURE.md, "Crate layout and layers"): a
//! module may use modules of its own layer or below, never above. This reads every source file's
//! `crate::…` paths and checks them against the table, so a new upward import fails here
//! instead of growing a circle.

use std::path::{Path, PathBuf};

/// Layer of a source file (path under `src/`), lowest first.
fn layer(file: &str) -> usize {
    let top = file.split('/').next().unwrap_or(file).trim_end_matches(".rs");
    match top {
        "element" | "error" | "archive" | "params" | "shape" | "metrics" => 0,
        "stage" | "cpu_fragment" | "backend" => 1,
        "graph" => 2,
        "stages" if file == "stages/mod.rs" => 4,
        "stages" => 3,
        "config" | "fallback" => 4,
        "executor" | "run" | "api" | "bench" | "chunking" | "stream" | "policy" | "lib" => 5,
        other => panic!("{file}: module '{other}' has no layer in tests/layers.rs"),
    }
}

/// Layer of a `crate::…` path's target (`crate::stages::words` is a stage-level helper; the
/// registry is `crate::stages` itself and its items).
fn target_layer(path: &str) -> usize {
    let mut parts = path.split("::").skip(1);
    let module = parts.next().unwrap_or("");
    let item = parts.next().unwrap_or("");
    match module {
        // Items re-exported at the crate root are the public API's (the top layer).
        m if !m.chars().next().is_some_and(char::is_lowercase) || ROOT_ITEMS.contains(&m) => 5,
        "stages" if item.chars().next().is_some_and(char::is_lowercase) && !item.starts_with("kind_by") => {
            layer(&format!("stages/{item}.rs"))
        }
        "stages" => 4,
        other => layer(&format!("{other}.rs")),
    }
}

/// Functions of the crate root (lib.rs) that code may call as `crate::name`.
const ROOT_ITEMS: &[&str] = &["preset", "decompress", "inspect", "archived_abs_bound", "is_stored_raw"];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_module_imports_a_higher_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut upward = Vec::new();
    for file in files {
        let name = file.strip_prefix(&src).unwrap().to_string_lossy().replace('\\', "/");
        let own = layer(&name);
        let text = std::fs::read_to_string(&file).unwrap();
        // Code only: doc comments may mention any module, and unit tests (the last item of a
        // file) may use the whole crate.
        let tests = ["#[cfg(test)]\nmod ", "#[cfg(test)]\npub(crate) mod "];
        let code = &text[..tests.iter().filter_map(|t| text.find(t)).min().unwrap_or(text.len())];
        let code = code.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n");
        for (at, _) in code.match_indices("crate::") {
            let path: String =
                code[at..].chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
            if path.split("::").nth(1).is_some_and(|m| m.is_empty()) {
                continue;
            }
            let target = target_layer(&path);
            if target > own {
                upward.push(format!("{name} (layer {own}) uses {path} (layer {target})"));
            }
        }
    }
    upward.sort();
    upward.dedup();
    assert!(upward.is_empty(), "upward imports:\n{}", upward.join("\n"));
}
