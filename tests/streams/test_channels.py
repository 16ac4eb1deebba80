"""Primary-key routing must be stable across processes and documented values."""

import subprocess
import sys

import numpy as np

from vectorlog.streams.channels import (
    assign_pchannels,
    hash_int64,
    hash_str,
    shard_of,
    vchannel_name,
)


def test_int_hash_is_fmix64_low_32_bits():
    def fmix64(k: int) -> int:
        m = (1 << 64) - 1
        k &= m
        k ^= k >> 33
        k = (k * 0xFF51AFD7ED558CCD) & m
        k ^= k >> 33
        k = (k * 0xC4CEB9FE1A85EC53) & m
        k ^= k >> 33
        return k & 0xFFFFFFFF

    keys = np.array([0, 1, -1, 2**63 - 1, -(2**63), 123456789], dtype=np.int64)
    assert hash_int64(keys).tolist() == [fmix64(int(k)) for k in keys]


def test_str_hash_is_crc32_of_utf8():
    import zlib

    assert hash_str(["a", "héllo"]).tolist() == [zlib.crc32(b"a"), zlib.crc32("héllo".encode())]


def test_routing_is_identical_in_another_process():
    keys = ["alpha", "beta", "gamma", "δ"]
    here = shard_of(keys, 4).tolist() + shard_of(np.arange(20, dtype=np.int64), 3).tolist()
    code = (
        "import numpy as np; from vectorlog.streams.channels import shard_of;"
        "print(shard_of(['alpha','beta','gamma','δ'],4).tolist()"
        " + shard_of(np.arange(20,dtype=np.int64),3).tolist())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "123", "PATH": ""},
        cwd=".",
    )
    assert out.stdout.strip() == str(here)


def test_routing_spreads_keys_over_every_shard():
    counts = np.bincount(shard_of(np.arange(10_000, dtype=np.int64), 4), minlength=4)
    assert counts.min() > 2_000


def test_vchannels_map_onto_pchannels_round_robin():
    assert assign_pchannels(collection_id=6, shards_num=3, num_pchannels=4) == [2, 3, 0]
    assert vchannel_name("vl", 2, 6, 0) == "vl-dml_2_6v0"
