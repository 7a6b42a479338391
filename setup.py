"""Builds the optional C kernels of the built-in games; without a compiler the Python paths
are used (the same answers, slower)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "pipeline.games._trie",
            ["pipeline/games/_trie.c"],
            depends=["pipeline/games/_scan.h"],
            optional=True,
        ),
        Extension(
            "pipeline.games._pathgame",
            ["pipeline/games/_pathgame.c"],
            depends=["pipeline/games/_scan.h"],
            optional=True,
        ),
    ]
)
