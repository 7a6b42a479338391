"""Builds the optional C kernel of strgame; without a compiler the pure-Python solver is used."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("games._trie", ["games/_trie.c"], optional=True)])
