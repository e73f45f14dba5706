r"""Competition-shaped files for examples and tests: several rows per entity, an id, a category, ordinal labels.

The rows of a QWK competition are rarely independent: DSB2019 held many
assessments per installation, PetFinder many pets per rescuer. :func:`entity_frames`
draws such a training table and a test table of other entities, so that the
leak of K-fold CV on grouped rows, and its cure (``cv.group``), can be shown
on a file anyone can make.

Each entity :math:`e` has a latent level :math:`u_e \sim N(0, 1)` and
entity-level columns (``region``, a category; ``tenure``, continuous); each of
its rows adds row-level columns (``x1`` ... ``x4``) and the label is the
ordinal class of

.. math:: z = u_e + 0.8\,x_1 - 0.5\,x_2 + 0.3\,[\text{region} = \text{north}] + \varepsilon,
          \qquad \varepsilon \sim N(0, \sigma^2),

cut at the quantiles of ``proportions``, on the scale 1..K. With
``row_noise=0`` an entity's rows are exact copies (the label included), the
hardest case for K-fold CV.
"""

from __future__ import annotations

import numpy as np

from qwkboost.validation import check_int, check_real, check_seed

__all__ = ["entity_frames"]

REGIONS = np.array(["north", "south", "east", "west"])


def entity_frames(n_entities: int = 2000, rows_per_entity: int = 3, n_test_entities: int = 2000,
                  row_noise: float = 1.0, label_noise: float = 0.6, proportions=(0.3, 0.3, 0.25, 0.15),
                  seed: int = 0):
    """A training and a test DataFrame (``id``, ``entity``, features, ``label``) of distinct entities.

    Parameters
    ----------
    n_entities : int
        Entities in the training table; each has ``rows_per_entity`` rows.
    rows_per_entity : int
    n_test_entities : int
        Entities in the test table, one row each, none of them in the training table.
    row_noise : float
        Standard deviation of the row-level columns around the entity's own; ``0`` copies the entity's rows exactly.
    label_noise : float
        :math:`\\sigma`, the noise of the latent score (shared by an entity's rows when ``row_noise`` is 0).
    proportions : sequence of float
        Class shares (their number is K; labels 1..K).
    seed : int

    Returns
    -------
    train, test : DataFrame
    """
    import pandas as pd

    n_entities = check_int(n_entities, "n_entities", 2)
    rows_per_entity = check_int(rows_per_entity, "rows_per_entity", 1)
    n_test_entities = check_int(n_test_entities, "n_test_entities", 1)
    row_noise = check_real(row_noise, "row_noise", 0.0)
    label_noise = check_real(label_noise, "label_noise", 0.0)
    p = np.asarray(proportions, dtype=float)
    if p.ndim != 1 or p.size < 2 or np.any(p <= 0):
        raise ValueError(f"proportions must be two or more positive class shares; got {proportions!r}")
    rs = np.random.RandomState(check_seed(seed))
    n_all = n_entities + n_test_entities
    u = rs.randn(n_all)
    region = rs.randint(0, REGIONS.size, n_all)
    tenure = rs.gamma(2.0, 200.0, n_all).round(1)
    base = rs.randn(n_all, 4)

    def rows(entities: np.ndarray, repeat: int, noise: float) -> pd.DataFrame:
        e = np.repeat(entities, repeat)
        x = base[e] + noise * rs.randn(e.size, 4)
        eps = np.repeat(rs.randn(entities.size), repeat) if noise == 0 else rs.randn(e.size)
        z = u[e] + 0.8 * x[:, 0] - 0.5 * x[:, 1] + 0.3 * (region[e] == 0) + label_noise * eps
        return pd.DataFrame({"entity": [f"e{i:06d}" for i in e], "region": REGIONS[region[e]], "tenure": tenure[e],
                             **{f"x{j + 1}": x[:, j].round(4) for j in range(4)}, "z": z})

    train = rows(np.arange(n_entities), rows_per_entity, row_noise)
    test = rows(np.arange(n_entities, n_all), 1, row_noise)
    cuts = np.quantile(train["z"], np.cumsum(p / p.sum())[:-1])
    for df in (train, test):
        df["label"] = np.searchsorted(cuts, df.pop("z")) + 1
    train = train.sample(frac=1.0, random_state=rs).reset_index(drop=True)
    train.insert(0, "id", np.arange(len(train)))
    test.insert(0, "id", np.arange(len(train), len(train) + len(test)))
    return train, test
