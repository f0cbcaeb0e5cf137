# Type stub of the compiled module (crates/fzmod-python/src). The public API is the `fzmod`
# package, which normalises arguments before calling these.

from typing import Any, List, Optional, Tuple

import numpy

DEFAULT_PRESET: str

def compress(
    array: numpy.ndarray,
    preset: str,
    pipeline: Optional[str],
    mode: Optional[str],
    bound: Optional[float],
    backend_choice: str,
    mask_nan: bool = False,
    fill_value: Optional[float] = None,
    chunk: Optional[str] = None,
) -> bytes: ...
def decompress(data: numpy.ndarray, out: Optional[numpy.ndarray], backend_choice: str) -> numpy.ndarray: ...
def decompress_region(data: numpy.ndarray, region: str, backend_choice: str) -> numpy.ndarray: ...
def compress_stream(
    src: Any,
    dst: Any,
    seekable: bool,
    dtype: str,
    shape: List[int],
    preset: str,
    pipeline: Optional[str],
    mode: Optional[str],
    bound: Optional[float],
    backend_choice: str,
    mask_nan: bool,
    fill_value: Optional[float],
    chunk: str,
    value_range: Optional[Tuple[float, float]],
) -> str:
    """JSON text of the streamed archive's facts (fzmod::ArchiveFacts)."""

def decompress_stream(src: Any, dst: Any, backend_choice: str) -> Tuple[str, List[int]]: ...
def inspect(data: numpy.ndarray) -> str:
    """JSON text of the archive's facts (fzmod::ArchiveFacts)."""

def presets() -> List[Tuple[str, str]]: ...
def compare(original: numpy.ndarray, decoded: numpy.ndarray, abs_bound: Optional[float]) -> str:
    """JSON text of the reconstruction's quality (fzmod::QualityFacts)."""

def resolve_settings(
    preset: str,
    pipeline: Optional[str],
    mode: Optional[str],
    bound: Optional[float],
    backend_choice: str,
    mask_nan: bool = False,
    fill_value: Optional[float] = None,
) -> Optional[Tuple[str, float]]: ...
def pipeline_toml(pipeline: dict) -> str: ...
def resolve_backend(choice: str) -> Tuple[str, str]: ...
def compress_device(
    ptr: int,
    typestr: str,
    shape: List[int],
    sync: bool,
    stream: Optional[int],
    preset: str,
    pipeline: Optional[str],
    mode: Optional[str],
    bound: Optional[float],
    backend_choice: str,
    mask_nan: bool = False,
    fill_value: Optional[float] = None,
) -> bytes: ...
def decompress_device(data: numpy.ndarray, backend_choice: str) -> DeviceArray: ...

class DeviceArray:
    @property
    def __cuda_array_interface__(self) -> dict: ...
    @property
    def shape(self) -> List[int]: ...
    @property
    def dtype(self) -> str: ...
