// Launch structs of the fused cuSZp-family program, defined once here; mod.rs passes them by
// value and checks their size against the Rust mirror at compile time on both sides.

#define DECODE_WARPS 4  // coder blocks (warps) per thread block; mod.rs launches match
#define NO_INDEX 0xffffffffffffffffull

// Sizes of one fused chain run. Grid extents z, y, x (x fastest).
struct Geometry {
    u64 n;         // natural elements (pipeline input)
    u64 ncodes;    // elements entering the coder
    u64 nblocks;   // coder blocks
    u64 meta_len;  // metadata bytes before the payloads
    u64 nx;
    u64 ny;
    u64 nz;
};

static_assert(sizeof(Geometry) == 56, "Geometry layout: stages/cuszp_fusion/mod.rs Geometry");
