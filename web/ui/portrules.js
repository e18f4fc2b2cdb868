// The Preview's listening ports: the answer of GET preview/ports made into
// the choices it offers. Pure: no DOM, no network (web/uitest drives it).

/** listeningPorts is the sorted, unique, valid port numbers of a preview/ports answer ([{port}]). */
export function listeningPorts(answer) {
  if (!Array.isArray(answer)) return [];
  const ports = answer.map((p) => p?.port).filter((p) => Number.isInteger(p) && p >= 1 && p <= 65535);
  return [...new Set(ports)].sort((a, b) => a - b);
}
