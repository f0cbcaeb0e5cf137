//! CPU side of Store: the values pass unchanged (the segment holds their little-endian bytes,
//! so NaN payloads, infinities, −0.0 and subnormals come back bit for bit).

use crate::element::Buffer;
use crate::error::{corrupt, Result};

/// Forward: the values themselves become the segment.
pub fn forward(values: Buffer) -> Buffer {
    values
}

/// Inverse: the segment's values, once their count matches the record.
pub fn inverse(values: Buffer, num_elements: u64) -> Result<Buffer> {
    if values.len() as u64 != num_elements {
        return Err(corrupt!("Store: segment holds {} values, record says {num_elements}", values.len()));
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_values_pass_bit_for_bit() {
        let v = vec![f32::from_bits(0x7fc0_0bad), -0.0, f32::NEG_INFINITY, f32::from_bits(1), 3.5];
        let Buffer::F32(back) = inverse(forward(Buffer::F32(v.clone())), 5).unwrap() else { unreachable!() };
        assert_eq!(
            back.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_count_that_differs_from_the_record_is_corrupt() {
        assert!(inverse(Buffer::F64(vec![1.0, 2.0]), 3).is_err());
    }
}
