"""Packaging for disentbook, driven by nbdev's settings.ini.

nbdev's template imports `pkg_resources`, which current setuptools no longer ships; this
version reads settings.ini with configparser only, so `pip install .` works with any
setuptools >= 64.
"""
from configparser import ConfigParser
from pathlib import Path

import setuptools

here = Path(__file__).parent
config = ConfigParser(delimiters=["="])
config.read(here / "settings.ini", encoding="utf-8")
cfg = config["DEFAULT"]

licenses = {"apache2": ("Apache Software License 2.0", "OSI Approved :: Apache Software License")}
statuses = ["1 - Planning", "2 - Pre-Alpha", "3 - Alpha", "4 - Beta", "5 - Production/Stable"]
lic = licenses[cfg["license"]]
min_python = cfg["min_python"]
py_versions = ["3.10", "3.11", "3.12", "3.13"]

requirements = cfg.get("requirements", "").split()
dev_requirements = cfg.get("dev_requirements", "").split()
readme = here / "README.md"

setuptools.setup(
    name=cfg["lib_name"],
    version=cfg["version"],
    description=cfg["description"],
    long_description=readme.read_text(encoding="utf-8") if readme.exists() else cfg["description"],
    long_description_content_type="text/markdown",
    author=cfg["author"],
    author_email=cfg["author_email"],
    url=cfg["git_url"],
    license=lic[0],
    keywords=cfg["keywords"].split(),
    classifiers=[
        "Development Status :: " + statuses[int(cfg["status"]) - 1],
        "Intended Audience :: " + cfg["audience"],
        "License :: " + lic[1],
        "Natural Language :: " + cfg["language"],
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ]
    + ["Programming Language :: Python :: " + v for v in py_versions if v >= min_python],
    packages=setuptools.find_packages(include=["disentbook", "disentbook.*"]),
    include_package_data=True,
    package_data={"disentbook": ["paper_values/*.csv", "paper_values/*.json", "assets/*.npz", "assets/*.md", "assets/*.json", "assets/pretrained/*"]},
    python_requires=">=" + min_python,
    install_requires=requirements,
    extras_require={"dev": dev_requirements},
    zip_safe=False,
    entry_points={
        "console_scripts": cfg.get("console_scripts", "").split(),
        "nbdev": [f"{cfg['lib_path']}={cfg['lib_path']}._modidx:d"],
    },
)
