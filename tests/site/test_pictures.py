"""The catalogue site's pictures are drawn again only when what they show changed."""

from __future__ import annotations

from jobs.site.build import Pictures


def test_a_picture_is_copied_when_its_data_did_not_change_and_drawn_when_it_did(tmp_path):
    calls = []

    def bars(data, path, title):
        calls.append((tuple(data), title))
        path.write_bytes(repr((data, title)).encode())

    first = tmp_path / "a"
    first.mkdir()
    img = Pictures(first, None)
    img.draw(bars, "x.png", [1, 2], "t")
    img.draw(bars, "y.png", [3], "t")
    img.save()
    assert (img.drawn, img.copied) == (2, 0) and len(calls) == 2

    second = tmp_path / "b"
    second.mkdir()
    img = Pictures(second, first)
    img.draw(bars, "x.png", [1, 2], "t")  # the same data: copied
    img.draw(bars, "y.png", [3, 4], "t")  # other data: drawn
    img.draw(bars, "z.png", [5], "t")  # new: drawn
    img.save()
    assert (img.drawn, img.copied) == (2, 1) and calls[-1] == ((5,), "t")
    assert (second / "x.png").read_bytes() == (first / "x.png").read_bytes()
    assert (second / "y.png").read_bytes() == repr(([3, 4], "t")).encode()

    third = tmp_path / "c"
    third.mkdir()
    (second / "x.png").unlink()  # a picture gone from the previous build is drawn
    img = Pictures(third, second)
    img.draw(bars, "x.png", [1, 2], "t")
    img.draw(bars, "y.png", [3, 4], "other title")  # its title is part of what it shows
    assert (img.drawn, img.copied) == (2, 0)
