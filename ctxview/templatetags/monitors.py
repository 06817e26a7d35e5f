"""``{% firing_banner project %}``: the banner of the monitors firing in a project (the runs list, a run)."""

from django import template

from ctxview.models import AlertEpisode
from ctxview.views_monitors import call_links

register = template.Library()


@register.inclusion_tag("ctxview/_monitor_banner.html")
def firing_banner(project):
    episodes = list(
        AlertEpisode.objects.filter(
            monitor__project=project, monitor__state="firing", resolved_at=None, test=False
        ).select_related("monitor")[:5]
    )
    links = call_links(episodes)
    for episode in episodes:
        episode.call_id = links.get((episode.cause.get("run"), episode.cause.get("seq")))
    return {"firing": episodes, "project": project}
