//! How stages see the pipeline shape: as at most three dimensions (z, y, x), x fastest.

use crate::archive::{Reader, Writer, MAX_DIMS};
use crate::error::{corrupt, Error, Result};

/// The shape seen by spatial stages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grid {
    /// Extents, slowest first: `[z, y, x]`.
    pub dims: [usize; 3],
    /// Number of dimensions with extent > 1 (1 to 3).
    pub ndim: usize,
}

impl Grid {
    /// Drop unit dimensions and fold everything before the last three into z.
    pub fn from_shape(shape: &[usize]) -> Grid {
        let real: Vec<usize> = shape.iter().copied().filter(|&d| d != 1).collect();
        let ndim = real.len().clamp(1, 3);
        let mut dims = [1usize; 3];
        let n = real.len();
        if n > 3 {
            dims = [real[..n - 2].iter().fold(1usize, |a, &d| a.saturating_mul(d)), real[n - 2], real[n - 1]];
        } else {
            for (slot, &d) in dims.iter_mut().rev().zip(real.iter().rev()) {
                *slot = d;
            }
        }
        Grid { dims, ndim }
    }

    /// The grid of the pipeline shape, checked against the number of elements a stage got.
    pub fn for_stage(shape: &[usize], len: usize, stage: &str) -> Result<Grid> {
        let g = Grid::from_shape(shape);
        if g.len() != len {
            return Err(Error::Pipeline(format!(
                "{stage}: input has {len} elements but the pipeline shape {shape:?} has {}",
                g.len()
            )));
        }
        Ok(g)
    }

    /// A recorded grid must be the one the archive header's shape gives.
    pub(crate) fn check_header(&self, header: &crate::archive::Header, stage: &str) -> Result<()> {
        let shape: Vec<usize> = header.shape.iter().map(|&d| usize::try_from(d).unwrap_or(usize::MAX)).collect();
        if Grid::from_shape(&shape).dims != self.dims {
            return Err(corrupt!("{stage} grid {:?} does not match the header shape {:?}", self.dims, header.shape));
        }
        Ok(())
    }

    /// Number of elements (saturating: an impossible grid never matches a real buffer).
    pub fn len(&self) -> usize {
        self.dims.iter().fold(1usize, |a, &d| a.saturating_mul(d))
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Append the extents z, y, x as varints (docs/FORMAT.md 6.2 and 6.3).
    pub(crate) fn write_to(&self, w: &mut Writer) {
        for d in self.dims {
            w.varint(d as u64);
        }
    }

    /// Read extents written by [`Grid::write_to`]; their product must not overflow.
    pub(crate) fn read_from(r: &mut Reader) -> Result<Grid> {
        let mut dims = [0usize; 3];
        for d in &mut dims {
            *d = r.count(u64::MAX, "grid extent")?;
        }
        if dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).is_none() {
            return Err(corrupt!("grid {dims:?} overflows"));
        }
        Ok(Grid { dims, ndim: 3 })
    }
}

/// Parse `2161x4320` (C order, slowest first) into extents.
pub fn parse_shape(s: &str) -> Result<Vec<usize>> {
    let dims: Option<Vec<usize>> =
        s.split(['x', 'X', ',', '*']).map(|d| d.trim().parse().ok().filter(|&d: &usize| d > 0)).collect();
    match dims {
        Some(d) if d.len() > MAX_DIMS => Err(Error::InvalidArgument(format!(
            "bad shape '{s}': {} dimensions, an archive holds at most {MAX_DIMS}",
            d.len()
        ))),
        Some(d) if !d.is_empty() => Ok(d),
        _ => Err(Error::InvalidArgument(format!(
            "bad shape '{s}': expected positive extents like 2161x4320 (slowest first)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_and_drops_unit_dims() {
        assert_eq!(Grid::from_shape(&[2161, 4320]), Grid { dims: [1, 2161, 4320], ndim: 2 });
        assert_eq!(Grid::from_shape(&[100]), Grid { dims: [1, 1, 100], ndim: 1 });
        assert_eq!(Grid::from_shape(&[1, 7, 1, 5]), Grid { dims: [1, 7, 5], ndim: 2 });
        assert_eq!(Grid::from_shape(&[2, 18, 64, 128]), Grid { dims: [36, 64, 128], ndim: 3 });
        assert_eq!(Grid::from_shape(&[1]), Grid { dims: [1, 1, 1], ndim: 1 });
    }

    #[test]
    fn parses_shapes() {
        assert_eq!(parse_shape("2161x4320").unwrap(), vec![2161, 4320]);
        assert!(parse_shape("0x5").is_err());
        assert!(parse_shape("ax5").is_err());
        assert!(parse_shape("").is_err());
    }

    #[test]
    fn too_many_dimensions_name_the_limit() {
        let shape = vec!["2"; MAX_DIMS + 1].join("x");
        let err = parse_shape(&shape).unwrap_err().to_string();
        assert!(err.contains("17 dimensions") && err.contains("at most 16"), "{err}");
        assert_eq!(parse_shape(&vec!["2"; MAX_DIMS].join("x")).unwrap().len(), MAX_DIMS);
    }
}
