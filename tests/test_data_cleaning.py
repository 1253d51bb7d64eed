"""Corpus cleaning: Gutenberg markers, BOM, CRLF, illustration blocks, document windows, report."""
from data_pipelines import clean_files, clean_text, split_documents


def test_clean_text_strips_markers_bom_crlf_and_illustrations():
    raw = ("\ufeffHeader junk\r\n*** START OF THE PROJECT GUTENBERG EBOOK X ***\r\n"
           "Para one.\r\n\r\n[Illustration: a [nested] caption\r\nover lines]\r\n\r\n\r\n\r\nPara two.\r\n"
           "*** END OF THE PROJECT GUTENBERG EBOOK X ***\r\nLicence text")
    text, facts = clean_text(raw)
    assert text == "Para one.\n\nPara two."
    assert facts == {"had_bom": True, "had_crlf": True, "gutenberg_markers": True, "illustrations_removed": 1}


def test_split_documents_respects_max_chars_and_keeps_all_text():
    paras = [("word " * 30).strip() for _ in range(10)] + ["x" * 250]
    text = "\n\n".join(paras)
    docs = split_documents(text, max_chars=100)
    assert all(0 < len(d) <= 100 for d in docs)
    assert "".join(docs).replace("\n", "").replace(" ", "") == text.replace("\n", "").replace(" ", "")


def test_sample_books_report_and_empty_file(data_dir, tmp_path):
    """Openings of an English and a Chinese book, which the full corpora and the embedded sample share."""
    empty = tmp_path / "pg0.txt"
    empty.write_text("\ufeff\r\n\r\n", encoding="utf-8")
    paths = [str(data_dir / "corpus_en" / "pg11.txt"), str(data_dir / "corpus_zh" / "pg27166.txt"), str(empty)]
    docs, report = clean_files(paths, max_chars=20_000)
    pg11, pg27166, blank = report.files
    assert pg11.illustrations_removed == 1 and not pg11.gutenberg_markers and pg11.bytes_after < pg11.bytes_before
    assert pg27166.documents >= 1 and pg27166.illustrations_removed == 0
    assert blank.empty and blank.documents == 0 and report.empty_files == 1
    texts = [t for _, t in docs]
    assert not any("[Illustration" in t or "\r" in t or "\ufeff" in t for t in texts)
    assert texts[0].startswith("Alice’s Adventures in Wonderland")
    assert any("Alice was beginning to get very tired" in t for t in texts)
    assert any("我在年青時候也曾經做過許多夢" in t for t in texts)
    assert report.documents == len(docs) == pg11.documents + pg27166.documents


def test_real_books_report_and_empty_file(full_data_dir, tmp_path):
    # Full data only: pg98 (BOM, CRLF, Gutenberg markers) and pg1342 (162 illustrations) as published;
    # the sample ships no Gutenberg header or marker (the PG licence: strip them from derived texts).
    data_dir = full_data_dir
    empty = tmp_path / "pg0.txt"
    empty.write_text("\ufeff\r\n\r\n", encoding="utf-8")
    paths = [str(data_dir / "corpus_en" / "pg98.txt"), str(data_dir / "corpus_en" / "pg1342.txt"), str(empty)]
    docs, report = clean_files(paths, max_chars=20_000)
    pg98, pg1342, blank = report.files
    assert pg98.had_bom and pg98.gutenberg_markers and pg98.bytes_after < pg98.bytes_before
    assert pg1342.illustrations_removed > 100
    assert blank.empty and blank.documents == 0 and report.empty_files == 1
    texts = [t for _, t in docs]
    assert not any("PROJECT GUTENBERG" in t or "[Illustration" in t or "\r" in t or "\ufeff" in t for t in texts)
    assert any("It was the best of times" in t for t in texts)
    assert report.documents == len(docs) == pg98.documents + pg1342.documents
