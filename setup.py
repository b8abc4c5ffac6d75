"""fairseq_luong: Luong et al. (2015) attention NMT, RNNsearch and perSPE as a fairseq plugin.

Install the dependencies with ``bash scripts/setup.sh`` (it pins torch and
installs the ve-fairseq fork with ``--no-deps``); this file only makes the
package importable from anywhere (``pip install -e . --no-deps``).
"""
from setuptools import find_packages, setup

setup(
    name="fairseq_luong",
    version="0.1.0",
    description="Luong et al. 2015 global/local attention NMT, RNNsearch and perSPE for fairseq",
    packages=find_packages(include=["fairseq_luong", "fairseq_luong.*", "fairseq_fixes"]),
    package_data={"fairseq_luong.data": ["ja_chunk_grammar.txt"]},
    python_requires=">=3.10",
    # Deliberately empty: see requirements.txt and scripts/setup.sh.
    install_requires=[],
)
