import matplotlib.pyplot as plt
import numpy as np

from qwkboost.evaluation import plots


def test_confusion_matrix_counts():
    fig = plots.confusion_matrix(np.array([1, 1, 2, 3]), np.array([1, 2, 2, 3]), np.array([1, 2, 3]))
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts == ["1", "1", "0", "0", "1", "0", "0", "0", "1"]
    plt.close(fig)


def test_histograms_draw_cut_points():
    rs = np.random.RandomState(0)
    y = rs.randint(0, 3, 300)
    fig = plots.score_histograms(y + rs.normal(0, 0.5, 300), y, np.array([0, 1, 2]), cuts=[0.5, 1.5])
    ax = fig.axes[0]
    vlines = [l for l in ax.get_lines() if len(set(l.get_xdata())) == 1]
    assert sorted(l.get_xdata()[0] for l in vlines) == [0.5, 1.5]
    assert len(ax.get_legend().get_texts()) == 4   # 3 classes + cut points
    plt.close(fig)
