//! AdaptiveBitpack on the device (kernels in device.cu). The encode is a region fragment
//! (`Fragment`): a tile of whole blocks, each tile's payload placed by the region's look-back
//! and its blocks' metadata written as the region's table; alone, it runs as a region of one.
//! The decode scans the metadata's payload sizes first, so that each block is read only at its
//! place, then decodes each block by a group of lanes: inside a region into the tile, alone by
//! its own kernel straight into the output.

use super::{AdaptiveBitpack, Layout};
use crate::backend::cuda::device::{
    exclusive_scan, first_guess, grid, scan_partials_len, DeviceBuffer, DeviceForwarded, DeviceRun, DeviceStage,
    THREADS,
};
use crate::backend::cuda::region::{
    Code, ForwardPart, Fragment, Geometry, InversePart, Region, SCRATCH_BYTES, TILE_BUFFER_BYTES,
};
use crate::backend::cuda::{device_error, Program};
use crate::element::DType;
use crate::error::{corrupt, Error, Result};
use cudarc::driver::PushKernelArg;

/// Warps (coder blocks) per thread block (`AB_WARPS`).
const WARPS: u64 = 4;

static SOURCE: &str = include_str!("device.cu");

fn defines(input: DType, layout: Layout) -> String {
    format!("#define CODE_I16 {}\n#define LAYOUT {}\n", u8::from(input == DType::I16), layout.code())
}

pub(crate) fn program(input: DType, layout: Layout) -> Program {
    Program::new(SOURCE, defines(input, layout))
}

impl AdaptiveBitpack {
    /// Worst-case payload of one block: the raw first magnitude, a sign region and every plane.
    fn max_block_bytes(&self) -> usize {
        let rate = self.input.size() * 8;
        rate / 8 + (self.block_size as usize).div_ceil(8) * (rate + 1)
    }

    /// Lanes per block in the kernels (`lanes`): a lane per byte column (8 elements) up to a
    /// warp, rounded up to a power of two.
    fn group_lanes(&self) -> u32 {
        self.block_size.div_ceil(8).next_power_of_two().min(32)
    }

    /// The launch of a kernel with a lane group per block.
    fn block_groups(&self, nblocks: u64) -> cudarc::driver::LaunchConfig {
        let per_warp = u64::from(32 / self.group_lanes());
        grid(nblocks.div_ceil(per_warp) * 32, WARPS * 32)
    }

    /// Blocks of a region tile: as many as fit a tile buffer as codes and, at worst, encoded,
    /// and whose codes and places fit the scratch (device.cu `ab_region_size`), a multiple of
    /// 8 where that leaves any (so that tiles divide evenly for more stages before it).
    fn tile_blocks(&self) -> usize {
        let codes = self.block_size as usize * self.input.size();
        let fit =
            (TILE_BUFFER_BYTES / codes).min(TILE_BUFFER_BYTES / self.max_block_bytes()).min((SCRATCH_BYTES - 4) / 8);
        if fit >= 8 {
            fit / 8 * 8
        } else {
            fit
        }
    }

    /// The decode's first passes: each block's payload size from its metadata (validated),
    /// scanned into offsets on the device. `None` for an empty stream.
    fn placed(&self, run: &mut DeviceRun, bytes: &DeviceBuffer) -> Result<Option<Placed>> {
        let n = self
            .num_elements
            .ok_or_else(|| Error::Pipeline("AdaptiveBitpack inverse needs a decoded record".into()))?;
        let len = bytes.known_len()?;
        let nblocks = n.div_ceil(u64::from(self.block_size));
        // Every block costs at least one metadata byte: n is bounded by the bytes we hold.
        if nblocks > len as u64 {
            return Err(corrupt!("AdaptiveBitpack: {n} elements need more than {len} bytes"));
        }
        if n == 0 {
            return Ok(None);
        }
        let meta_len = nblocks.checked_mul(self.layout.meta_bytes() as u64).filter(|&m| m <= len as u64);
        let meta_len =
            meta_len.ok_or_else(|| corrupt!("AdaptiveBitpack: metadata for {nblocks} blocks exceeds {len} bytes"))?;
        let program = program(self.input, self.layout);
        let (costs, check_total) = (run.kernel(&program, "ab_costs")?, run.kernel(&program, "ab_check_total")?);
        let cost = run.alloc(DType::U32, nblocks as usize)?;
        let offsets = run.alloc(DType::U64, nblocks as usize + 1)?;
        let partials = run.alloc(DType::U64, scan_partials_len(nblocks))?;
        let payload = len as u64 - meta_len;
        // Flags, not host waits: a block the flags condemn is skipped by the decode, which
        // reads no byte outside its own scanned place.
        let layout_err = run.error_flag(format!(
            "AdaptiveBitpack: a block's code is invalid, or the blocks do not need the segment's {payload} payload bytes"
        ))?;
        let s = run.stream().clone();
        let p = |x: &DeviceBuffer| x.ptr(&s);
        let b64 = u64::from(self.block_size);
        // SAFETY: argument lists match device.cu; the metadata lies inside `bytes`.
        unsafe {
            s.launch_builder(&costs)
                .arg(&p(bytes))
                .arg(&nblocks)
                .arg(&b64)
                .arg(&p(&cost))
                .arg(&layout_err)
                .launch(grid(nblocks, u64::from(THREADS)))
                .map_err(device_error)?;
        }
        exclusive_scan(run, &program, p(&cost), nblocks, p(&partials), p(&offsets))?;
        // SAFETY: as above.
        unsafe {
            s.launch_builder(&check_total)
                .arg(&p(&offsets))
                .arg(&nblocks)
                .arg(&payload)
                .arg(&layout_err)
                .launch(grid(1, 1))
                .map_err(device_error)?;
        }
        Ok(Some(Placed { n, nblocks, meta_len, payload, offsets, scratch: vec![cost, partials] }))
    }
}

/// What the decode's first passes leave: the element and block counts, the metadata and
/// payload lengths, each block's payload offset (nblocks + 1 words) and the buffers the
/// passes wrote, kept until the decode has run.
struct Placed {
    n: u64,
    nblocks: u64,
    meta_len: u64,
    payload: u64,
    offsets: DeviceBuffer,
    scratch: Vec<DeviceBuffer>,
}

impl DeviceStage for AdaptiveBitpack {
    fn forward(&self, run: &mut DeviceRun, inputs: &[&DeviceBuffer]) -> Result<DeviceForwarded> {
        let [v] = inputs else { return Err(Error::Pipeline("AdaptiveBitpack takes one input".into())) };
        // Every block size fits a region tile (region_tiles_fit_their_buffers): the encode is
        // a region of one, reading the codes once.
        let alone = Region::alone(self, false).ok_or_else(|| {
            Error::Device(format!("AdaptiveBitpack: blocks of {} fit no region tile", self.block_size))
        })?;
        alone.forward_alone(run, v, DType::U8)
    }

    fn inverse(&self, run: &mut DeviceRun, outputs: &[&DeviceBuffer]) -> Result<Vec<DeviceBuffer>> {
        // Its own kernel, a group of lanes per block straight into the output: the region of
        // one (`Region::alone(self, true)`, through a shared tile) measured 8 % slower
        // (docs/PERFORMANCE.md, "AdaptiveBitpack's encode as region tiles").
        let [bytes] = outputs else { return Err(Error::Pipeline("AdaptiveBitpack inverse takes one buffer".into())) };
        let Some(placed) = self.placed(run, bytes)? else { return Ok(vec![run.alloc(self.input, 0)?]) };
        let Placed { n, nblocks, meta_len, payload, offsets, scratch: _keep } = placed;
        let program = program(self.input, self.layout);
        let decode = run.kernel(&program, "ab_decode")?;
        let value_err = run.error_flag(format!(
            "AdaptiveBitpack: a magnitude does not fit {}, or a zero has a sign (non-canonical)",
            self.input
        ))?;
        let out = run.alloc(self.input, n as usize)?;
        let s = run.stream().clone();
        let p = |x: &DeviceBuffer| x.ptr(&s);
        let (b64, lanes) = (u64::from(self.block_size), self.group_lanes());
        // SAFETY: argument list matches device.cu; each block is read only inside its scanned
        // place, which the decode checks against the payload and against the block's own code.
        unsafe {
            s.launch_builder(&decode)
                .arg(&p(bytes))
                .arg(&meta_len)
                .arg(&p(&offsets))
                .arg(&payload)
                .arg(&n)
                .arg(&b64)
                .arg(&lanes)
                .arg(&p(&out))
                .arg(&value_err)
                .launch(self.block_groups(nblocks))
                .map_err(device_error)?;
        }
        Ok(vec![out])
    }
}

impl Fragment for AdaptiveBitpack {
    fn sources(&self) -> Vec<&'static str> {
        vec![SOURCE]
    }

    fn defines(&self) -> String {
        defines(self.input, self.layout)
    }

    fn geometry(&self) -> Option<Geometry> {
        let (blocks, width) = (self.tile_blocks(), self.input.size());
        (blocks > 0).then_some(Geometry {
            in_width: width,
            out_width: 1,
            same_count: false,
            granule: blocks * self.block_size as usize * width,
            coder: true,
        })
    }

    fn forward_code(&self) -> Code {
        let (b, w, lanes) = (self.block_size, self.input.size(), self.group_lanes());
        format!("ab_region_size($in, $bytes / {w}u, {b}u, {lanes}u, $scratch)")
    }

    fn emit_code(&self) -> Code {
        let (b, w, lanes) = (self.block_size, self.input.size(), self.group_lanes());
        format!("ab_region_emit($in, $bytes / {w}u, {b}u, {lanes}u, $scratch, $out)")
    }

    fn entry_code(&self) -> Code {
        let (b, w, blocks) = (self.block_size, self.input.size(), self.tile_blocks());
        format!("ab_region_entry($seg, $tile, $bytes / {w}u, {b}u, {blocks}u, $scratch)")
    }

    fn inverse_code(&self) -> Code {
        let (b, w, lanes, blocks) = (self.block_size, self.input.size(), self.group_lanes(), self.tile_blocks());
        format!("ab_region_decode($seg, (const u64*)$0, $1, $2, $tile, $bytes / {w}u, {b}u, {lanes}u, {blocks}u, $out)")
    }

    fn forward(&self, run: &mut DeviceRun, _input: Option<&DeviceBuffer>, n: usize) -> Result<ForwardPart> {
        let nblocks = n.div_ceil(self.block_size as usize);
        let meta_len = nblocks * self.layout.meta_bytes();
        let worst = meta_len + nblocks * self.max_block_bytes();
        let (segment, length_at) = run.alloc_dynamic(DType::U8, first_guess(n * self.input.size(), meta_len, worst))?;
        let record = self.record(n);
        Ok(ForwardPart::Coder {
            args: Vec::new(),
            table_bytes: meta_len as u64,
            segment,
            length_at,
            record: Box::new(move |_| Ok(record)),
        })
    }

    fn inverse(&self, run: &mut DeviceRun, outputs: &[Option<&DeviceBuffer>]) -> Result<InversePart> {
        let [Some(bytes)] = outputs else {
            return Err(Error::Pipeline("AdaptiveBitpack inverse takes its segment".into()));
        };
        let Some(placed) = self.placed(run, bytes)? else {
            return Ok(InversePart::Coder { args: vec![0, 0, 0], input_bytes: 0, keep: Vec::new() });
        };
        let at = placed.offsets.ptr(run.stream());
        let input_bytes = usize::try_from(placed.n)
            .ok()
            .and_then(|n| n.checked_mul(self.input.size()))
            .ok_or_else(|| corrupt!("AdaptiveBitpack: {} elements", placed.n))?;
        let mut keep = placed.scratch;
        keep.push(placed.offsets);
        Ok(InversePart::Coder { args: vec![at, placed.meta_len, placed.payload], input_bytes, keep })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A region tile holds whole blocks whose codes, worst-case payload and scratch state all
    /// fit (device.cu `ab_region_size`), at least one, for every code type and block size.
    #[test]
    fn region_tiles_fit_their_buffers() {
        for input in [DType::I16, DType::I32] {
            for b in 1..=crate::stages::adaptive_bitpack::MAX_BLOCK {
                let ab = AdaptiveBitpack::new(input, b, Layout::Packed).unwrap();
                let blocks = ab.tile_blocks();
                assert!(blocks * b as usize * input.size() <= TILE_BUFFER_BYTES, "{input} {b}");
                assert!(blocks * ab.max_block_bytes() <= TILE_BUFFER_BYTES, "{input} {b}");
                assert!(8 * blocks + 4 <= SCRATCH_BYTES, "{input} {b}");
                assert!(blocks > 0 && ab.geometry().is_some(), "{input} {b}");
            }
        }
        // cuSZp's blocks of 32 i32 codes: 120 blocks of at most 136 bytes; 16 bits: 232 of 70.
        let blocks = |input, b| AdaptiveBitpack::new(input, b, Layout::Packed).unwrap().tile_blocks();
        assert_eq!((blocks(DType::I32, 32), blocks(DType::I16, 32), blocks(DType::I32, 5)), (120, 232, 440));
    }
}
