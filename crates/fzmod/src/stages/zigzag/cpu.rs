//! CPU reference of Zigzag: one pure map per element ([`Word::zigzag`]), any order.

use crate::stages::words::{map_words, Word, Words};

pub fn forward(w: Words) -> Words {
    map_words(w, Word::zigzag, Word::zigzag)
}

pub fn inverse(w: Words) -> Words {
    map_words(w, Word::unzigzag, Word::unzigzag)
}
