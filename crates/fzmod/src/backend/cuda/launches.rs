//! Launch lists: the kernels and memsets of one job recorded as values, then run directly or
//! as a CUDA graph. A list that repeats exactly (a reused `Compressor` called on inputs of one
//! shape: the same kernels, configurations, arguments and workspace addresses) replays a graph
//! built from it: one launch instead of one per kernel (on 1 MiB calls of the cuSZp presets,
//! +10–15 % device throughput). The list is its own key, so a replay cannot differ from a direct run; and graphs are
//! built from the values, not by stream capture, so another thread's work on the shared stream
//! never joins or breaks one.

use super::{device_error, CudaDevice};
use crate::error::Result;
use cudarc::driver::{sys, CudaFunction, DeviceRepr, LaunchConfig};
use std::ffi::c_void;

/// Graphs (and lists seen once) kept per device, least recently used dropped first: a list
/// recurs only if fewer than this many others ran since, e.g. a compress and a decode for each
/// of 32 shapes, pipelines or bounds in turn.
const MAX_GRAPHS: usize = 64;

/// The operations of one job, in stream order.
#[derive(Default)]
pub(crate) struct LaunchList {
    ops: Vec<Op>,
    /// Every value the operations depend on, in order: the graph cache's key.
    key: Vec<u64>,
}

enum Op {
    /// Set `bytes` bytes at device address `at` to zero.
    Zero {
        at: u64,
        bytes: usize,
    },
    Kernel(Kernel),
}

struct Kernel {
    function: CudaFunction,
    config: LaunchConfig,
    /// The argument values, each starting on a word (a kernel parameter is at most 8-aligned).
    words: Vec<u64>,
    /// Word offset of each argument in `words`.
    starts: Vec<usize>,
}

/// Adds the arguments of one kernel, in the kernel's parameter order.
pub(crate) struct Args<'a> {
    list: &'a mut LaunchList,
}

impl Args<'_> {
    /// The next argument: a value the kernel takes by value (a device address is a `u64`), of
    /// a type without padding (integers, floats, the launch structs of u64 fields): its bytes
    /// are part of the key.
    pub(crate) fn arg<T: DeviceRepr + Copy>(self, value: &T) -> Self {
        let bytes = std::mem::size_of::<T>();
        let Some(Op::Kernel(k)) = self.list.ops.last_mut() else { unreachable!("Args follows a kernel") };
        let start = k.words.len();
        k.starts.push(start);
        k.words.resize(start + bytes.div_ceil(8), 0);
        // SAFETY: `value` is a plain `Copy` value of `bytes` bytes; the words were just sized to
        // hold them, and u64 storage is aligned for any kernel parameter type.
        unsafe {
            std::ptr::copy_nonoverlapping((value as *const T).cast::<u8>(), k.words[start..].as_mut_ptr().cast(), bytes)
        };
        self.list.key.extend_from_slice(&k.words[start..]);
        self.list.key.push(bytes as u64);
        self
    }
}

impl LaunchList {
    /// Zero `bytes` bytes at device address `at`.
    pub(crate) fn zero(&mut self, at: u64, bytes: usize) {
        self.key.extend([0, at, bytes as u64]);
        self.ops.push(Op::Zero { at, bytes });
    }

    /// Launch `function` with `config`; the arguments follow.
    pub(crate) fn kernel(&mut self, function: &CudaFunction, config: LaunchConfig) -> Args<'_> {
        let (g, b) = (config.grid_dim, config.block_dim);
        let dims = [g.0, g.1, g.2, b.0, b.1, b.2, config.shared_mem_bytes];
        self.key.extend([1, function.cu_function() as u64]);
        self.key.extend(dims.map(u64::from));
        let kernel = Kernel { function: function.clone(), config, words: Vec::new(), starts: Vec::new() };
        self.ops.push(Op::Kernel(kernel));
        Args { list: self }
    }
}

impl Kernel {
    /// The parameter pointers `cuLaunchKernel` and graph nodes take (valid while `self` is).
    fn params(&mut self) -> Vec<*mut c_void> {
        let base = self.words.as_mut_ptr();
        // SAFETY: every start lies inside `words`.
        self.starts.iter().map(|&s| unsafe { base.add(s) }.cast()).collect()
    }
}

/// An instantiated graph of one launch list.
struct Graph {
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
}

// SAFETY: graph handles are plain driver objects; the cache's mutex serialises every use.
unsafe impl Send for Graph {}

impl Drop for Graph {
    fn drop(&mut self) {
        // SAFETY: both handles were created by `build` and are destroyed once, here.
        unsafe {
            if !self.exec.is_null() {
                sys::cuGraphExecDestroy(self.exec);
            }
            sys::cuGraphDestroy(self.graph);
        }
    }
}

/// Graphs by launch list, and the lists seen once (a list becomes a graph when it repeats:
/// building one costs more than a single direct run).
#[derive(Default)]
pub(crate) struct Graphs {
    built: Vec<(Vec<u64>, Graph)>,
    seen: Vec<Vec<u64>>,
    launches: u64,
}

fn check(r: sys::CUresult) -> Result<()> {
    r.result().map_err(device_error)
}

impl CudaDevice {
    /// Run a job's launch list on the stream: as a graph when the same list ran before.
    pub(crate) fn run_list(&self, mut list: LaunchList) -> Result<()> {
        self.bind()?;
        let mut graphs = self.graphs.lock().map_err(|_| crate::error::Error::Device("graph cache poisoned".into()))?;
        let stream = self.stream.cu_stream();
        if let Some(at) = graphs.built.iter().position(|(key, _)| *key == list.key) {
            let entry = graphs.built.remove(at);
            // SAFETY: the graph was built from an equal list; its kernels' modules live as
            // long as the device, and its buffers are the caller's (equal addresses).
            let launched = check(unsafe { sys::cuGraphLaunch(entry.1.exec, stream) });
            graphs.built.push(entry);
            graphs.launches += 1;
            return launched;
        }
        if let Some(at) = graphs.seen.iter().position(|key| *key == list.key) {
            graphs.seen.remove(at);
            // A driver that cannot build the graph still runs the list directly.
            if let Ok(graph) = self.build(&mut list) {
                // SAFETY: as above; the graph was just built from this list.
                check(unsafe { sys::cuGraphLaunch(graph.exec, stream) })?;
                if graphs.built.len() == MAX_GRAPHS {
                    graphs.built.remove(0);
                }
                graphs.built.push((std::mem::take(&mut list.key), graph));
                graphs.launches += 1;
                return Ok(());
            }
        } else {
            if graphs.seen.len() == MAX_GRAPHS {
                graphs.seen.remove(0);
            }
            graphs.seen.push(list.key.clone());
        }
        drop(graphs);
        for op in &mut list.ops {
            match op {
                Op::Zero { at, bytes } => {
                    // SAFETY: the recorded range lies in a live buffer of the job.
                    unsafe { cudarc::driver::result::memset_d8_async(*at, 0, *bytes, stream) }.map_err(device_error)?
                }
                Op::Kernel(k) => {
                    let (c, mut params) = (k.config, k.params());
                    // SAFETY: the arguments were recorded in the kernel's parameter order, with
                    // the types its source declares (the job's contract with its kernels).
                    unsafe {
                        cudarc::driver::result::launch_kernel(
                            k.function.cu_function(),
                            c.grid_dim,
                            c.block_dim,
                            c.shared_mem_bytes,
                            stream,
                            &mut params,
                        )
                    }
                    .map_err(device_error)?
                }
            }
        }
        Ok(())
    }

    /// How many launch lists ran as graphs so far (built or replayed).
    pub fn graph_launches(&self) -> u64 {
        self.graphs.lock().map_or(0, |g| g.launches)
    }

    /// One graph node per operation, each depending on the one before (stream order).
    fn build(&self, list: &mut LaunchList) -> Result<Graph> {
        let mut graph = std::ptr::null_mut();
        // SAFETY: creates an empty graph owned by the `Graph` below (or destroyed on error).
        check(unsafe { sys::cuGraphCreate(&mut graph, 0) })?;
        let mut built = Graph { graph, exec: std::ptr::null_mut() };
        let mut last: Option<sys::CUgraphNode> = None;
        for op in &mut list.ops {
            let mut node = std::ptr::null_mut();
            let (deps, ndeps) = match &last {
                Some(n) => (n as *const sys::CUgraphNode, 1),
                None => (std::ptr::null(), 0),
            };
            match op {
                Op::Zero { at, bytes } => {
                    let params = sys::CUDA_MEMSET_NODE_PARAMS {
                        dst: *at,
                        pitch: 0,
                        value: 0,
                        elementSize: 1,
                        width: *bytes,
                        height: 1,
                    };
                    // SAFETY: the parameters describe a live range of the job's buffers.
                    check(unsafe {
                        sys::cuGraphAddMemsetNode(&mut node, graph, deps, ndeps, &params, self.ctx.cu_ctx())
                    })?;
                }
                Op::Kernel(k) => {
                    let mut args = k.params();
                    let c = k.config;
                    let params = sys::CUDA_KERNEL_NODE_PARAMS {
                        func: k.function.cu_function(),
                        gridDimX: c.grid_dim.0,
                        gridDimY: c.grid_dim.1,
                        gridDimZ: c.grid_dim.2,
                        blockDimX: c.block_dim.0,
                        blockDimY: c.block_dim.1,
                        blockDimZ: c.block_dim.2,
                        sharedMemBytes: c.shared_mem_bytes,
                        kernelParams: args.as_mut_ptr(),
                        extra: std::ptr::null_mut(),
                        kern: std::ptr::null_mut(),
                        ctx: std::ptr::null_mut(),
                    };
                    // SAFETY: as a direct launch; the driver copies the argument values.
                    check(unsafe { sys::cuGraphAddKernelNode_v2(&mut node, graph, deps, ndeps, &params) })?;
                }
            }
            last = Some(node);
        }
        // SAFETY: instantiates the complete graph; the executable is owned by `built`.
        check(unsafe { sys::cuGraphInstantiateWithFlags(&mut built.exec, graph, 0) })?;
        Ok(built)
    }
}
