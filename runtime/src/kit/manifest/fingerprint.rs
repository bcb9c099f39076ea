//! The fingerprint `kfop gen` records of the `kfop.yaml` it validated, which the generated code
//! checks at compile time against the file it embeds: an edit made without `kfop gen` fails the
//! build instead of the operator's start.

/// 64-bit FNV-1a of `text`: a `const fn`, so generated code can compare it at compile time.
pub const fn fingerprint(text: &str) -> u64 {
    let bytes = text.as_bytes();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < bytes.len() {
        hash ^= bytes[i] as u64;
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        i += 1;
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values_and_sensitivity() {
        // FNV-1a's published test vectors.
        assert_eq!(fingerprint(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fingerprint("a"), 0xaf63_dc4c_8601_ec8c);
        assert_ne!(fingerprint("kind: X\n"), fingerprint("kind: X\r\n"));
    }
}
