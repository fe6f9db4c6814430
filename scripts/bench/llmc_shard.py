"""Reads llm.c .bin token shards (a 256 x int32 header: magic 20240520, version, token count; then
uint16 tokens), as dataloader/token_file.cpp does, for the Python sides of the benchmarks. Needs
numpy only, so that importing it costs a timed tokenizer run nothing more.
"""
import sys

import numpy as np

LLMC_MAGIC = 20240520
HEADER_INTS = 256


def read_llmc_shard(path):
    """The tokens of one shard as a uint16 array; exits with a message on a file that is not one."""
    header = np.fromfile(path, dtype=np.int32, count=HEADER_INTS)
    if len(header) < 3 or header[0] != LLMC_MAGIC:
        sys.exit(f"{path}: not an llm.c shard (magic {header[0] if len(header) else 'missing'})")
    tokens = np.fromfile(path, dtype=np.uint16, offset=HEADER_INTS * 4)
    if len(tokens) != header[2]:
        sys.exit(f"{path}: header says {header[2]} tokens, file holds {len(tokens)}")
    return tokens
