"""Builds the optional C kernels of the built-in games; without a compiler the Python paths
are used (the same answers, slower)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("games._trie", ["games/_trie.c"], depends=["games/_scan.h"], optional=True),
        Extension(
            "games._pathgame", ["games/_pathgame.c"], depends=["games/_scan.h"], optional=True
        ),
    ]
)
