"""The file-parser plugin: its stages (stage); loading an `input_file` (sources), reading each kind of file as text
(text; PDFs and HTML in a limited child process: plugins.common.documents, shared with web fetch), reading scanned
pages with a vision model (ocr) and the file annotations an answer carries (annotations)."""
