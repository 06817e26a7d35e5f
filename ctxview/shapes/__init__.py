"""What the pages show, shaped from plain data by pure functions (no Django): the call page, explain,
compare and item pages, the runs list's query string, the KPI strip, help texts, colours and plotly's
shared pieces. The run overview's panels (``ctxview.panels``) use them too."""
