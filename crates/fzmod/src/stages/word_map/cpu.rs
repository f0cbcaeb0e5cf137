//! CPU reference of the word maps: one pure map per element ([`Word`]), any order.

use super::Map;
use crate::stages::words::{map_words, Word, Words};

pub fn forward(map: Map, w: Words) -> Words {
    match map {
        Map::Zigzag => map_words(w, Word::zigzag, Word::zigzag),
        Map::Negabinary => map_words(w, Word::negabinary, Word::negabinary),
    }
}

pub fn inverse(map: Map, w: Words) -> Words {
    match map {
        Map::Zigzag => map_words(w, Word::unzigzag, Word::unzigzag),
        Map::Negabinary => map_words(w, Word::unnegabinary, Word::unnegabinary),
    }
}
