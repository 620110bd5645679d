// Times come from the server in UTC; show them in the browser's own time zone.
document.querySelectorAll("time[datetime]").forEach((element) => {
  const when = new Date(element.getAttribute("datetime"));
  if (!Number.isNaN(when.getTime())) {
    element.textContent = when.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
  }
});
