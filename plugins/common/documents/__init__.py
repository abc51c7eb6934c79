"""Reading documents in a limited child process (sandbox: PDFs by pdf, HTML by html_child), shared by the
file-parser (an `input_file`) and web fetch (a fetched PDF), and the 400 naming a refused file (errors)."""
