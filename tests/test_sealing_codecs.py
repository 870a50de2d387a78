"""Token codecs: HKDF, HMAC, canonical base64url, the two built-in codecs and their key rings."""

from __future__ import annotations

import base64
import hashlib
import hmac
import string
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrtr_sansio.sealing import AesGcmCodec, HmacSha256Codec, RequestStateError, StateCodec
from mrtr_sansio.sealing._codecs import (
    _b64url_decode_portable,
    _HmacSha256,
    b64url_decode,
    b64url_encode,
    hkdf_sha256,
)

OLD = bytes(range(32))
NEW = bytes(range(100, 132))
CODECS = [HmacSha256Codec, AesGcmCodec]
URL_CHARS = string.ascii_letters + string.digits + "-_"


def reason(codec: StateCodec, token: Any) -> str:
    with pytest.raises(RequestStateError) as info:
        codec.unseal(token)
    return info.value.reason


# --- HKDF and HMAC --------------------------------------------------------------------------


def test_hkdf_rfc5869_test_case_1() -> None:
    okm = hkdf_sha256(b"\x0b" * 22, bytes(range(0xF0, 0xFA)), 42, salt=bytes(range(0x0D)))
    assert okm.hex() == (
        "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"
    )


def test_hkdf_rfc5869_test_case_3_empty_salt_and_info() -> None:
    assert hkdf_sha256(b"\x0b" * 22, b"", 42, salt=b"").hex() == (
        "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"
    )


@given(st.binary(min_size=1, max_size=80), st.binary(max_size=40), st.integers(1, 200))
def test_hkdf_matches_cryptography(ikm: bytes, info: bytes, length: int) -> None:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    reference = HKDF(hashes.SHA256(), length, b"salt", info).derive(ikm)
    assert hkdf_sha256(ikm, info, length, salt=b"salt") == reference


@pytest.mark.parametrize("length", [0, 255 * 32 + 1])
def test_hkdf_refuses_impossible_lengths(length: int) -> None:
    with pytest.raises(ValueError, match="length"):
        hkdf_sha256(OLD, b"x", length)


@given(st.binary(min_size=1, max_size=130), st.binary(max_size=8), st.binary(max_size=300))
def test_precomputed_hmac_is_hmac_sha256(key: bytes, head: bytes, message: bytes) -> None:
    # Keys shorter than, as long as and longer than the SHA-256 block (hashed first).
    assert _HmacSha256(key, head).tag(message) == hmac.digest(key, head + message, "sha256")


def test_hmac_rfc4231_test_case_2() -> None:
    # Key shorter than the block, as all derived keys are.
    tag = _HmacSha256(b"Jefe", b"what do ya want ").tag(b"for nothing?")
    assert tag.hex() == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"


# --- base64url ------------------------------------------------------------------------------


@given(st.binary(max_size=200))
def test_b64url_round_trip_and_standard_form(raw: bytes) -> None:
    token = b64url_encode(raw)
    assert token == base64.urlsafe_b64encode(raw).decode().rstrip("=")
    assert b64url_decode(token) == raw


def _is_canonical_property(decode: Any, text: str) -> None:
    decoded = decode(text)
    if decoded is None:
        if all(c in URL_CHARS for c in text) and len(text) % 4 != 1:
            # Only a non-zero unused bit in the last character can be left.
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            assert b64url_encode(raw) != text
    else:
        assert b64url_encode(decoded) == text


TEXTS = st.text(alphabet=URL_CHARS + "+/=. \n\t\x00é", max_size=24)


@given(TEXTS)
def test_b64url_decode_accepts_exactly_canonical_strings(text: str) -> None:
    _is_canonical_property(b64url_decode, text)


@given(TEXTS)
def test_portable_decoder_accepts_exactly_canonical_strings(text: str) -> None:
    _is_canonical_property(_b64url_decode_portable, text)


@pytest.mark.parametrize(
    "text",
    [
        "QUJD=",  # padding
        "QUI=",  # padding
        "QUI",  # valid, for contrast below
        "QUJ",  # unused bits set: "QUI" is the canonical form of the same bytes
        "QR",  # unused bits set
        "Q",  # impossible length
        "QU+D",  # standard alphabet
        "QU/D",
        "QU D",  # whitespace
        "QUJD\n",
        "QUé",  # non-ASCII
    ],
)
def test_b64url_non_canonical_examples(text: str) -> None:
    assert (b64url_decode(text) is None) == (text != "QUI")
    assert (_b64url_decode_portable(text) is None) == (text != "QUI")


# --- codecs ---------------------------------------------------------------------------------


@pytest.mark.parametrize("codec_type", CODECS)
@given(payload=st.binary(max_size=300))
def test_codec_round_trip(codec_type: Any, payload: bytes) -> None:
    codec = codec_type([OLD])
    token = codec.seal(payload)
    assert isinstance(token, str)
    assert b64url_decode(token) is not None
    assert codec.unseal(token) == payload


def test_aes_gcm_hides_the_payload_hmac_does_not() -> None:
    secret = b"the quick brown fox jumps over the lazy dog"
    assert secret in b64url_decode(HmacSha256Codec([OLD]).seal(secret))  # type: ignore[operator]
    assert secret not in b64url_decode(AesGcmCodec([OLD]).seal(secret))  # type: ignore[operator]


def test_aes_gcm_uses_a_fresh_nonce_per_token() -> None:
    codec = AesGcmCodec([OLD])
    assert codec.seal(b"same") != codec.seal(b"same")


def test_aes_gcm_nonce_comes_from_token_bytes() -> None:
    codec = AesGcmCodec([OLD], token_bytes=lambda n: b"\x07" * n)
    raw = b64url_decode(codec.seal(b"x"))
    assert raw is not None
    assert raw[5:17] == b"\x07" * 12
    with pytest.raises(ValueError, match="token_bytes"):
        AesGcmCodec([OLD], token_bytes=lambda n: b"short").seal(b"x")


@pytest.mark.parametrize("codec_type", CODECS)
def test_token_layout_version_and_key_id(codec_type: Any) -> None:
    codec = codec_type([OLD])
    raw = b64url_decode(codec.seal(b"payload"))
    assert raw is not None
    assert raw[0] == (1 if codec_type is HmacSha256Codec else 2)
    kid = raw[1:5]
    assert b64url_decode(codec_type([OLD, NEW]).seal(b""))[1:5] == kid  # type: ignore[index]
    assert b64url_decode(codec_type([NEW, OLD]).seal(b""))[1:5] != kid  # type: ignore[index]


@pytest.mark.parametrize("codec_type", CODECS)
def test_codec_rejections(codec_type: Any) -> None:
    codec = codec_type([OLD])
    token = codec.seal(b"payload")
    raw = b64url_decode(token)
    assert raw is not None
    assert reason(codec, "") == "truncated"
    assert reason(codec, token[:8]) == "truncated"
    assert reason(codec, token + "=") == "malformed"
    assert reason(codec, token.replace("-", "+").replace("_", "/") + "+") == "malformed"
    # Another version byte: refused before the tag is even looked at.
    assert reason(codec, b64url_encode(bytes([raw[0] ^ 3]) + raw[1:])) == "unsupported_version"
    other = HmacSha256Codec if codec_type is AesGcmCodec else AesGcmCodec
    assert reason(codec, other([OLD]).seal(b"payload")) == "unsupported_version"
    assert reason(codec, codec_type([NEW]).seal(b"payload")) == "unknown_key"
    assert reason(codec, b64url_encode(raw[:-1] + bytes([raw[-1] ^ 1]))) == "bad_tag"
    assert reason(codec, b64url_encode(raw[:5] + raw[6:])) == "bad_tag"


def test_one_secret_derives_distinct_keys_per_codec() -> None:
    hmac_raw = b64url_decode(HmacSha256Codec([OLD]).seal(b""))
    aes_raw = b64url_decode(AesGcmCodec([OLD]).seal(b""))
    assert hmac_raw is not None
    assert aes_raw is not None
    assert hmac_raw[1:5] != aes_raw[1:5]
    # The configured secret is never the MAC key itself.
    assert hmac_raw[5:] != hmac.digest(OLD, hmac_raw[:5], "sha256")


@pytest.mark.parametrize("codec_type", CODECS)
def test_rotation_phases(codec_type: Any) -> None:
    """[old] -> [old, new] -> [new, old] -> [new]: each accepts exactly what it should."""
    phases = {
        "old": codec_type([OLD]),
        "old+new": codec_type([OLD, NEW]),
        "new+old": codec_type([NEW, OLD]),
        "new": codec_type([NEW]),
    }
    by_old = phases["old"].seal(b"p")
    by_new = phases["new"].seal(b"p")
    assert phases["old+new"].unseal(phases["old+new"].seal(b"p")) == b"p"
    assert phases["new+old"].unseal(phases["new+old"].seal(b"p")) == b"p"
    # Sealing key of each phase: the first.
    assert phases["old"].unseal(phases["old+new"].seal(b"p")) == b"p"
    assert phases["new"].unseal(phases["new+old"].seal(b"p")) == b"p"
    accepts = {
        "old": (True, False),
        "old+new": (True, True),
        "new+old": (True, True),
        "new": (False, True),
    }
    for name, (old_ok, new_ok) in accepts.items():
        codec = phases[name]
        for token, ok in ((by_old, old_ok), (by_new, new_ok)):
            if ok:
                assert codec.unseal(token) == b"p"
            else:
                assert reason(codec, token) == "unknown_key"


@pytest.mark.parametrize("codec_type", CODECS)
def test_key_ring_validation(codec_type: Any) -> None:
    with pytest.raises(ValueError, match="at least 32"):
        codec_type([b"k" * 31])
    with pytest.raises(ValueError, match="at least 32"):
        codec_type([OLD, b"short"])
    with pytest.raises(TypeError, match="bytes"):
        codec_type(["k" * 32])
    with pytest.raises(TypeError, match="sequence"):
        codec_type(OLD)
    with pytest.raises(ValueError, match="empty"):
        codec_type([])
    with pytest.raises(ValueError, match="share a key id"):
        codec_type([OLD, bytearray(OLD)])
    assert codec_type([bytearray(OLD), memoryview(NEW)]).unseal(codec_type([NEW]).seal(b"x"))


def test_aes_gcm_without_cryptography_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "cryptography.hazmat.primitives.ciphers.aead", None)
    with pytest.raises(ImportError, match=r"mrtr-sansio\[crypto\]"):
        AesGcmCodec([OLD])


def test_hkdf_is_sha256_based() -> None:
    # Extract step is HMAC-SHA256 keyed by the salt (RFC 5869 §2.2).
    prk = hmac.new(b"s", b"ikm", hashlib.sha256).digest()
    assert hkdf_sha256(b"ikm", b"i", 32, salt=b"s") == hmac.digest(prk, b"i\x01", "sha256")
