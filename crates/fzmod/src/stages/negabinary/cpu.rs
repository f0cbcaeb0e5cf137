//! CPU reference of Negabinary: one pure map per element ([`Word::negabinary`]), any order.

use crate::stages::words::{map_words, Word, Words};

pub fn forward(w: Words) -> Words {
    map_words(w, Word::negabinary, Word::negabinary)
}

pub fn inverse(w: Words) -> Words {
    map_words(w, Word::unnegabinary, Word::unnegabinary)
}
