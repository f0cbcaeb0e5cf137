//! Which stages form a fused region (backend/cuda/region.rs generates and runs them):
//! consecutive stages that each read only their predecessor's first output, which nothing else
//! reads, that all have fragments, with a coder only last, a gatherer only first (or second,
//! after a stage it runs inside its loads, or in the inverse its stores), and a tile that fits
//! them all. The same rule finds regions in a pipeline (forward) and in a decode plan
//! (inverse).

use crate::archive::InputRef;
use crate::backend::cuda::region::{tile_elements, Fragment, Geometry, Region};
use crate::stage::Stage;

/// Stages `start..end` as one region.
pub struct Found<'p> {
    pub start: usize,
    pub end: usize,
    pub region: Region<'p>,
}

/// A graph as the partition sees it: each stage and the references of its inputs, walked
/// forward (a pipeline) or inverse (a decode plan: stages whose inverse needs a global pass
/// join no region there).
pub struct Chain<'p> {
    pub stages: Vec<&'p dyn Stage>,
    pub inputs: Vec<Vec<InputRef>>,
    pub inverse: bool,
}

impl<'p> Chain<'p> {
    /// Whether stage `k + 1` takes over stage `k`'s main output on chip.
    fn links(&self, k: usize) -> bool {
        let main = InputRef::Stage { stage: k, port: 0 };
        self.inputs[k + 1] == [main]
            && self.inputs.iter().flat_map(|refs| refs.iter()).filter(|r| **r == main).count() == 1
    }

    fn geometry(&self, k: usize) -> Option<(&'p dyn Fragment, Geometry)> {
        let f = self.stages[k].fragment().filter(|f| !self.inverse || f.inverse_fuses())?;
        Some((f, f.geometry()?))
    }

    /// The region `start..end` if its stages fuse.
    fn region(&self, start: usize, end: usize) -> Option<Found<'p>> {
        if end - start < 2 || self.inputs[start].len() != 1 {
            return None;
        }
        let (fragments, geometries): (Vec<_>, Vec<_>) =
            (start..end).map(|k| self.geometry(k)).collect::<Option<Vec<_>>>()?.into_iter().unzip();
        let nested = self.nests(start);
        let tile = tile_elements(&geometries[usize::from(nested)..])?;
        Some(Found { start, end, region: Region { fragments, geometries, tile, nested } })
    }

    /// Whether stage `k` runs inside the gatherer after it: in its loads (forward), in its
    /// scatter's stores (inverse).
    fn nests(&self, k: usize) -> bool {
        k + 1 < self.stages.len()
            && self.geometry(k).is_some_and(|(f, _)| match self.inverse {
                false => f.load_code().is_some(),
                true => f.store_code().is_some(),
            })
            && self.geometry(k + 1).is_some_and(|(f, _)| match self.inverse {
                false => f.gathers(),
                true => f.inverse_scatters(),
            })
    }

    /// Whether stage `k` can pass its main output on to stage `k + 1` inside a region that
    /// starts at `start` (in the inverse walk, `start` is `k`): a gatherer takes it only from
    /// the stage that runs inside it.
    fn passes_on(&self, start: usize, k: usize) -> bool {
        let takes = |f: &dyn Fragment| match self.inverse {
            true => !f.inverse_scatters() || self.nests(k),
            false => !f.gathers() || (k == start && self.nests(k)),
        };
        k + 1 < self.stages.len()
            && self.links(k)
            && self.geometry(k).is_some_and(|(_, g)| !g.coder)
            && self.geometry(k + 1).is_some_and(|(f, _)| takes(f))
    }

    /// Whether stage `k`'s inverse, a global pass that ends no region, stores through stage
    /// `k - 1` (`Fragment::inverse_stores`): the element-wise stage whose main output it alone
    /// reconstructs. The decode walk then takes both at once.
    pub fn stores_through(&self, k: usize) -> bool {
        self.inverse
            && k > 0
            && self.links(k - 1)
            && self.geometry(k - 1).is_some_and(|(f, _)| f.store_code().is_some())
            && self.stages[k].fragment().is_some_and(|f| f.inverse_stores())
    }

    /// The longest region that starts at stage `start` (the forward walk).
    pub fn starting_at(&self, start: usize) -> Option<Found<'p>> {
        let mut end = start + 1;
        while self.passes_on(start, end - 1) {
            end += 1;
        }
        (start + 2..=end).rev().find_map(|end| self.region(start, end))
    }

    /// The longest region that ends at stage `last` (the inverse walk).
    pub fn ending_at(&self, last: usize) -> Option<Found<'p>> {
        let mut start = last;
        // A stage that runs inside the scatter after it is the region's first.
        while start > 0 && !(start < last && self.nests(start)) && self.passes_on(start - 1, start - 1) {
            start -= 1;
        }
        (start..last).find_map(|start| self.region(start, last + 1))
    }

    /// A pipeline's chain.
    pub fn of_pipeline(p: &'p super::Pipeline) -> Chain<'p> {
        Chain {
            stages: p.nodes().iter().map(|n| n.stage.as_ref()).collect(),
            inputs: p.nodes().iter().map(|n| n.inputs.iter().map(|r| r.expect("finalized")).collect()).collect(),
            inverse: false,
        }
    }

    /// The same graph walked as its decode is.
    pub fn inverted(self) -> Chain<'p> {
        Chain { inverse: true, ..self }
    }

    /// Every region of the forward walk, in order.
    pub fn forward_regions(&self) -> Vec<Found<'p>> {
        let (mut found, mut k) = (Vec::new(), 0);
        while k < self.stages.len() {
            match self.starting_at(k) {
                Some(r) => {
                    k = r.end;
                    found.push(r);
                }
                None => k += 1,
            }
        }
        found
    }

    /// Every region of the inverse walk, last first (the decode's order).
    pub fn inverse_regions(&self) -> Vec<Found<'p>> {
        let (mut found, mut done) = (Vec::new(), self.stages.len());
        while done > 0 {
            match self.ending_at(done - 1) {
                Some(r) => {
                    done = r.start;
                    found.push(r);
                }
                None => done -= 1,
            }
        }
        found
    }

    /// "a → b → c" for a region, from stage names.
    pub fn describe(&self, r: &Found, name: impl Fn(usize) -> String) -> String {
        (r.start..r.end).map(name).collect::<Vec<_>>().join(" → ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regions(toml: &str) -> Vec<(usize, usize)> {
        let p = crate::config::from_toml(toml).expect("a valid pipeline");
        Chain::of_pipeline(&p).forward_regions().iter().map(|r| (r.start, r.end)).collect()
    }

    const QUANT: &str = "[[stage]]\nname = \"q\"\ntype = \"Quantizer\"\nerror_bound = 1e-3\n";
    const CODED: &str = "[[stage]]\nname = \"n\"\ntype = \"Negabinary\"\ninput_type = \"int32\"\ninputs = [{from = \"t\"}]\n\
        [[stage]]\nname = \"b\"\ntype = \"Bitshuffle\"\ndata_type = \"uint32\"\nelement_width = 4\nblock_size = 16384\ninputs = [{from = \"n\"}]\n\
        [[stage]]\nname = \"r\"\ntype = \"RZE\"\nchunk_size = 16384\nword_size = 1\ninputs = [{from = \"b\"}]\n";

    #[test]
    fn a_gatherer_starts_a_region() {
        let tiled = |tile: &str| {
            format!("{QUANT}[[stage]]\nname = \"t\"\ntype = \"TiledLorenzo\"\n{tile}inputs = [{{from = \"q\", port = \"codes\"}}]\n{CODED}")
        };
        // The Quantizer runs inside the gatherer's loads: one region, the codes never reach
        // memory.
        assert_eq!(regions(&tiled("")), [(0, 5)]);
        assert_eq!(regions(&tiled("tile_x = 16\ntile_y = 2\n")), [(0, 5)]);
        // And inside its scatter's stores in the decode.
        let inverse = |toml: &str| {
            let p = crate::config::from_toml(toml).expect("a valid pipeline");
            let found = Chain::of_pipeline(&p).inverted().inverse_regions();
            found.iter().map(|r| (r.start, r.end, r.region.nested)).collect::<Vec<_>>()
        };
        assert_eq!(inverse(&tiled("")), [(0, 5, true)]);
        // The generated decode reconstructs through the scatter's storer: no codes array.
        let p = crate::config::from_toml(&tiled("")).expect("a valid pipeline");
        let chain = Chain::of_pipeline(&p).inverted();
        let source = chain.inverse_regions()[0].region.inverse_program().expect("a program").source();
        let kernel = &source[source.find("region_inverse(").expect("the kernel")..];
        assert!(kernel.contains("auto store = fz_store(") && kernel.contains("fz_stores(store)"));
        assert!(!kernel.contains("q_region_inverse("));
        // Forward, the codes are made (and outliers counted) where the gatherer reads them.
        let source = Chain::of_pipeline(&p).forward_regions()[0].region.forward_program().expect("a program").source();
        let kernel = &source[source.find("region_forward(").expect("the kernel")..];
        assert!(
            kernel.contains("fz_load([&](u64 i, bool own)")
                && kernel.contains("q_load((const real*)input, i, q_params, own")
        );
        assert_eq!(inverse(&tiled("tile_x = 5\ntile_y = 3\n")), [(2, 5, false), (0, 2, true)]);
        assert_eq!(inverse(&tiled("tile_x = 2\ntile_y = 2\n")), [(2, 5, false)]);
        // Tiles whose origins overflow the scratch area do not fuse (the Quantizer runs alone);
        // tiles that no coder chunk holds whole end their region before the coder.
        assert_eq!(regions(&tiled("tile_x = 2\ntile_y = 2\n")), [(2, 5)]);
        assert_eq!(regions(&tiled("tile_x = 5\ntile_y = 3\n")), [(0, 3), (3, 5)]);
        // A stream stage passes its output on.
        let block = format!(
            "{QUANT}[[stage]]\nname = \"t\"\ntype = \"Lorenzo\"\nblock_size = 64\ninputs = [{{from = \"q\", port = \"codes\"}}]\n{CODED}"
        );
        assert_eq!(regions(&block), [(0, 5)]);
        // N-D Lorenzo gathers its neighbours forward (the Quantizer in its loads); without a
        // decoded grid its inverse (prefix sums along every axis) joins no region.
        let nd = format!(
            "{QUANT}[[stage]]\nname = \"t\"\ntype = \"Lorenzo\"\nblock_size = 0\ninputs = [{{from = \"q\", port = \"codes\"}}]\n{CODED}"
        );
        assert_eq!(regions(&nd), [(0, 5)]);
        let p = crate::config::from_toml(&nd).expect("a valid pipeline");
        let inverse: Vec<_> =
            Chain::of_pipeline(&p).inverted().inverse_regions().iter().map(|r| (r.start, r.end)).collect();
        assert_eq!(inverse, [(2, 5)]);
        // Over a line (the grid a decoded record states) its inverse is one prefix sum in
        // stream order: the whole decode is one region.
        let line = crate::stages::lorenzo::Lorenzo {
            block_size: 0,
            grid: Some(crate::shape::Grid { dims: [1, 1, 1000], ndim: 1 }),
        };
        let mut chain = Chain::of_pipeline(&p).inverted();
        chain.stages[1] = &line;
        assert_eq!(chain.inverse_regions().iter().map(|r| (r.start, r.end)).collect::<Vec<_>>(), [(0, 5)]);
        let square =
            crate::stages::lorenzo::Lorenzo { grid: Some(crate::shape::Grid { dims: [1, 10, 100], ndim: 2 }), ..line };
        chain.stages[1] = &square;
        assert_eq!(chain.inverse_regions().iter().map(|r| (r.start, r.end)).collect::<Vec<_>>(), [(2, 5)]);
        // There its global pass stores the Quantizer's reconstruction instead; over a line (a
        // region) it does not, nor does a forward walk.
        assert!(chain.stores_through(1) && !chain.stores_through(2) && !chain.stores_through(0));
        chain.stages[1] = &line;
        assert!(!chain.stores_through(1));
        chain.stages[1] = &square;
        let forward = Chain { inverse: false, ..chain };
        assert!(!forward.stores_through(1));
    }
}
