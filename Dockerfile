FROM python:3.11-slim
WORKDIR /app
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 CTXVIEW_DATA_DIR=/app/var
COPY pyproject.toml README.md ./
COPY ctxview ./ctxview
COPY ingest ./ingest
RUN pip install --no-cache-dir .
COPY . .
RUN CTXVIEW_SECRET_KEY=build python manage.py collectstatic --noinput -v0
EXPOSE 8000
CMD ["gunicorn", "ctxview.wsgi:application", "-b", "0.0.0.0:8000", "--workers", "4"]
