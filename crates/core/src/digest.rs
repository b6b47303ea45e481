//! Content hashes: the sha256 that names a file's content everywhere in
//! memfs (versions, preconditions, the journal's content index). A leaf
//! module: it knows nothing else of memfs.

use sha2::{Digest, Sha256};

/// A sha256 as 32 bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sha([u8; 32]);

impl Sha {
    pub fn of(data: &[u8]) -> Sha {
        Sha(Sha256::digest(data).into())
    }

    /// The sha256 of `parts`, each after its length (so no two lists of
    /// parts hash alike by moving bytes from one part to the next).
    pub fn of_parts(parts: &[&[u8]]) -> Sha {
        let mut h = Sha256::new();
        for part in parts {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part);
        }
        Sha(h.finalize().into())
    }

    /// Parses 64 hex digits (either case).
    pub fn parse(hex: &str) -> Option<Sha> {
        let bytes = hex.as_bytes();
        if bytes.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, pair) in bytes.chunks(2).enumerate() {
            let digit = |b: u8| (b as char).to_digit(16);
            out[i] = (digit(pair[0])? * 16 + digit(pair[1])?) as u8;
        }
        Some(Sha(out))
    }

    pub fn hex(&self) -> String {
        hex(&self.0)
    }
}

/// `bytes` as lower-case hex digits.
pub fn hex(bytes: &[u8]) -> String {
    // (A table, not `format!` a byte: this runs on every answer that
    // names a sha256, where the formatter's machinery showed in profiles.)
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

/// `n` bytes from the kernel's random source, as hex (secrets, keys, ids).
pub fn random_hex(n: usize) -> std::io::Result<String> {
    let mut bytes = vec![0u8; n];
    random(&mut bytes)?;
    Ok(hex(&bytes))
}

impl std::fmt::Debug for Sha {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", &self.hex()[..12])
    }
}

impl std::fmt::Display for Sha {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.hex())
    }
}

/// The sha256 of `data` as 64 lower-case hex digits.
pub fn sha256_hex(data: &[u8]) -> String {
    Sha::of(data).hex()
}

/// HMAC-SHA256 of `message` under `key` (RFC 2104): what a server signs
/// an id it hands out with, so that another server with the same key knows
/// it made it.
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.map(|b| b ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

/// Compares two byte strings in time that depends on their lengths only
/// (secrets: tokens, session ids, CSRF tokens).
pub fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    // Keep the compiler from turning the fold into an early exit.
    std::hint::black_box(diff) == 0
}

/// Fills `bytes` from the kernel's random source; an error if it has none
/// (a token is never made from anything weaker).
pub fn random(bytes: &mut [u8]) -> std::io::Result<()> {
    let mut filled = 0;
    while filled < bytes.len() {
        let n =
            rustix::rand::getrandom(&mut bytes[filled..], rustix::rand::GetRandomFlags::empty())
                .map_err(std::io::Error::from)?;
        filled += n;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn hmac_sha256_matches_rfc_4231() {
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        // Test case 2, and case 6 (a key longer than the block).
        assert_eq!(
            hex(&super::hmac_sha256(
                b"Jefe",
                b"what do ya want for nothing?"
            )),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(
            hex(&super::hmac_sha256(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            )),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    use super::*;

    #[test]
    fn hex_round_trips_and_matches_the_known_digest() {
        let sha = Sha::of(b"abc");
        assert_eq!(
            sha.hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(Sha::parse(&sha.hex()), Some(sha));
        assert_eq!(Sha::parse(&sha.hex().to_uppercase()), Some(sha));
        assert_eq!(Sha::parse("zz"), None);
        assert_eq!(Sha::parse(&"g".repeat(64)), None);
    }
}
