//! Ratio parity with native cuSZp 3.0 (measured with its own CLI on an H100; rel bounds).

mod common;

use common::*;
use fzmod::{ErrorBound, ErrorMode};

/// (field, 1-D?, preset, rel bound, native cuSZp ratio)
const NATIVE: [(&str, bool, &str, f64, f64); 11] = [
    ("etopo5_2161x4320.f32", false, "cuszp3-fixed", 1e-3, 4.37),
    ("etopo5_2161x4320.f32", false, "cuszp3-plain", 1e-3, 4.52),
    ("etopo5_2161x4320.f32", false, "cuszp3-outlier", 1e-3, 8.68),
    ("etopo5_2161x4320.f32", false, "cuszp3-plain", 1e-2, 8.03),
    ("etopo5_2161x4320.f32", false, "cuszp3-outlier", 1e-2, 16.27),
    ("etopo5_2161x4320.f32", false, "cuszp3-plain", 1e-4, 3.09),
    ("etopo5_2161x4320.f32", false, "cuszp3-outlier", 1e-4, 4.92),
    ("etopo5_2161x4320.f32", true, "cuszp3-plain", 1e-3, 4.46),
    ("etopo5_2161x4320.f32", true, "cuszp3-outlier", 1e-3, 8.37),
    ("trinidad_dem_1201x2401.f32", false, "cuszp3-plain", 1e-3, 3.12),
    ("trinidad_dem_1201x2401.f32", false, "cuszp3-outlier", 1e-3, 10.08),
];

#[test]
fn ratios_reach_99_percent_of_native_cuszp() {
    let needed = ["etopo5_2161x4320.f32", "trinidad_dem_1201x2401.f32"];
    let Some(dir) = shared_data_for("ratios_reach_99_percent_of_native_cuszp", &needed) else { return };
    for (name, one_d, preset, rel, native) in NATIVE {
        let field = load(&dir.join(name));
        let shape = if one_d { vec![field.data.len()] } else { field.shape.clone() };
        let mut p = fzmod::preset(preset, &shape).unwrap();
        p.set_error_bound(ErrorBound::new(ErrorMode::Rel, rel).unwrap()).unwrap();
        let archive = p.compress(&field.data, &shape).unwrap();
        let ratio = field.data.byte_len() as f64 / archive.len() as f64;
        eprintln!(
            "{name} {} {preset} rel {rel:e}: {ratio:.4} (native {native}, {:.4}x)",
            if one_d { "1-D" } else { "N-D" },
            ratio / native
        );
        assert!(ratio >= 0.99 * native, "{name} {preset} rel {rel}: ratio {ratio:.4} < 0.99 × {native}");
    }
}
