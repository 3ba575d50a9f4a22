//! Protocol-buffer wire format, by hand: varints, tags and length-delimited fields, enough to
//! write Perfetto's `TracePacket`s without generated code. A small decoder checks the encoder
//! in the property tests.

/// Wire type of varint fields.
pub(crate) const VARINT: u8 = 0;
/// Wire type of fixed 64-bit fields.
pub(crate) const FIXED64: u8 = 1;
/// Wire type of length-delimited fields (strings, bytes, messages).
pub(crate) const LEN: u8 = 2;

/// Appends `v` as a base-128 varint.
#[inline]
pub(crate) fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends a field tag.
#[inline]
pub(crate) fn tag(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire));
}

/// Appends a varint field.
#[inline]
pub(crate) fn uint(out: &mut Vec<u8>, field: u32, v: u64) {
    tag(out, field, VARINT);
    varint(out, v);
}

/// Appends a fixed64 field.
#[inline]
pub(crate) fn fixed64(out: &mut Vec<u8>, field: u32, v: u64) {
    tag(out, field, FIXED64);
    out.extend_from_slice(&v.to_le_bytes());
}

/// Appends a length-delimited field holding `bytes`.
#[inline]
pub(crate) fn bytes(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    tag(out, field, LEN);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Appends a string field.
pub(crate) fn string(out: &mut Vec<u8>, field: u32, s: &str) {
    bytes(out, field, s.as_bytes());
}

/// One decoded field (test support and the decoder property test).
#[cfg(test)]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Field<'a> {
    Varint(u32, u64),
    Fixed64(u32, u64),
    Len(u32, &'a [u8]),
}

/// Decodes a varint at `*at`; `None` on truncation or overlong encoding.
#[cfg(test)]
pub(crate) fn read_varint(buf: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*at)?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

/// Decodes one message's fields; `None` when the bytes are not a well-formed message.
#[cfg(test)]
pub(crate) fn decode(buf: &[u8]) -> Option<Vec<Field<'_>>> {
    let mut at = 0;
    let mut fields = Vec::new();
    while at < buf.len() {
        let key = read_varint(buf, &mut at)?;
        let field = u32::try_from(key >> 3).ok()?;
        match (key & 7) as u8 {
            VARINT => fields.push(Field::Varint(field, read_varint(buf, &mut at)?)),
            FIXED64 => {
                let b: [u8; 8] = buf.get(at..at + 8)?.try_into().ok()?;
                at += 8;
                fields.push(Field::Fixed64(field, u64::from_le_bytes(b)));
            }
            LEN => {
                let n = usize::try_from(read_varint(buf, &mut at)?).ok()?;
                let end = at.checked_add(n)?;
                fields.push(Field::Len(field, buf.get(at..end)?));
                at = end;
            }
            _ => return None,
        }
    }
    Some(fields)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn varints_round_trip(v in any::<u64>()) {
            let mut out = Vec::new();
            varint(&mut out, v);
            let mut at = 0;
            prop_assert_eq!(read_varint(&out, &mut at), Some(v));
            prop_assert_eq!(at, out.len());
            prop_assert!(out.len() <= 10);
        }

        #[test]
        fn messages_round_trip(fields in proptest::collection::vec(
            (1u32..100_000, 0u8..3, any::<u64>(), proptest::collection::vec(any::<u8>(), 0..40)), 0..20)) {
            let mut out = Vec::new();
            for (f, wire, v, b) in &fields {
                match *wire {
                    0 => uint(&mut out, *f, *v),
                    1 => fixed64(&mut out, *f, *v),
                    _ => bytes(&mut out, *f, b),
                }
            }
            let back = decode(&out).expect("well-formed");
            prop_assert_eq!(back.len(), fields.len());
            for (got, (f, wire, v, b)) in back.iter().zip(&fields) {
                let want = match *wire {
                    0 => Field::Varint(*f, *v),
                    1 => Field::Fixed64(*f, *v),
                    _ => Field::Len(*f, b),
                };
                prop_assert_eq!(got, &want);
            }
        }

        #[test]
        fn decoder_never_panics(buf in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode(&buf);
        }
    }
}
