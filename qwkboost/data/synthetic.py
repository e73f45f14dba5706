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

__all__ = ["entity_frames", "id_frames"]

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
    import pandas as pd  # slow to import: pandas

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


def id_frames(n_train: int = 50_000, n_test: int = 20_000, levels=(2500, 900), skew: float = 0.5,
              effect_sd: float = 1.0, noise: float = 1.0, proportions=(0.3, 0.3, 0.25, 0.15), seed: int = 0):
    r"""A ratings-shaped training and test table whose id-like integer columns carry the signal.

    Column ``id_j`` (``j = 1, 2, ...``) holds one of ``levels[j-1]`` integer ids
    (sparse, as real user, item or store ids are), drawn with probabilities
    :math:`\propto e^{s Z}`, :math:`Z \sim N(0, 1)`, :math:`s` = ``skew`` (about
    ``n_train / levels`` rows per id, a few ids much more, a tail much less).
    Each id has an effect :math:`u \sim N(0, \sigma_u^2)`; three numeric columns
    ``x1 .. x3`` add a little, and the label is the ordinal class of

    .. math:: z = \sum_j u_{j}(\text{id}_j) + 0.3\,x_1 - 0.2\,x_2 + \varepsilon,
              \qquad \varepsilon \sim N(0, \sigma^2),

    cut at the training quantiles of ``proportions`` (labels 1..K). The test
    table draws its rows from the same ids. Name the id columns in
    ``data.categorical`` (they are integers, so they would be numbers otherwise).

    Returns
    -------
    train, test : DataFrame
        ``id``, ``id_1`` ... , ``x1``, ``x2``, ``x3``, ``label``.
    """
    import pandas as pd  # slow to import: pandas

    n_train = check_int(n_train, "n_train", 2)
    n_test = check_int(n_test, "n_test", 1)
    levels = [check_int(v, "levels", 2) for v in levels]
    skew = check_real(skew, "skew", 0.0)
    effect_sd = check_real(effect_sd, "effect_sd", 0.0)
    noise = check_real(noise, "noise", 0.0)
    p = np.asarray(proportions, dtype=float)
    if p.ndim != 1 or p.size < 2 or np.any(p <= 0):
        raise ValueError(f"proportions must be two or more positive class shares; got {proportions!r}")
    rs = np.random.RandomState(check_seed(seed))
    n = n_train + n_test
    cols, z = {}, np.zeros(n)
    for j, k in enumerate(levels, start=1):
        ids = np.sort(rs.choice(10 * k, k, replace=False)) + 10 ** (len(str(10 * k)))   # sparse integer ids
        w = np.exp(skew * rs.randn(k))
        pick = rs.choice(k, n, p=w / w.sum())
        cols[f"id_{j}"] = ids[pick]
        z += effect_sd * rs.randn(k)[pick]
    x = rs.randn(n, 3)
    z += 0.3 * x[:, 0] - 0.2 * x[:, 1] + noise * rs.randn(n)
    df = pd.DataFrame({"id": np.arange(n), **cols, **{f"x{j + 1}": x[:, j].round(4) for j in range(3)}})
    cuts = np.quantile(z[:n_train], np.cumsum(p / p.sum())[:-1])
    df["label"] = np.searchsorted(cuts, z) + 1
    return df.iloc[:n_train].reset_index(drop=True), df.iloc[n_train:].reset_index(drop=True)
