"""Landing files with every edge the ingest rules name (written once, committed beside this
script: tests/pipeline/data/edge_landing; run it with that folder to write them again)."""
import json
import sys
from pathlib import Path

root = Path(sys.argv[1])
H = "patient,event_type,timestamp,activity_code,number_of_executions,group,producer_code,CASE_diagnosis,CASE_age"
def hrow(p="1", e="x", t="2005-01-03", a="4101", n="1.0", g="Rad", pc="S", d="m", age="33.0"):
    return ",".join([p, e, t, a, n, g, pc, d, age])
rows = [hrow(), hrow(), hrow(), hrow(t="2005-01-03T10:00:00Z"), hrow(t="2005-01-03 10:00:00.1234567+01:00"),
        hrow(t="2005-01-03T10:00"), hrow(t="2005-01-03T10"), hrow(t="2005-W01-1"), hrow(t="20050103"),
        hrow(t="2005-02-30"), hrow(t=""), hrow(t=" 2005-01-04 "), hrow(t="2005-01-03T10:00:00.5"),
        hrow(t="2005-01-03T23:59:59.999999999-23:59"), hrow(t="1600-01-01"), hrow(t="2300-01-01"),
        hrow(t="0001-01-01"), hrow(t="9999-12-31T23:59:59"), hrow(t="2005-01-03T24:00:00"),
        hrow(n="abc"), hrow(n="1e400"), hrow(n="nan"), hrow(n=" 12 "), hrow(n="1_000"), hrow(n="+5"),
        hrow(n="-0"), hrow(n=".5"), hrow(n="5."), hrow(n="1e16"), hrow(n="123456789012345678901234567890"),
        hrow(n="0.1"), hrow(n="Infinity"), hrow(n="\u00a0"), hrow(age="\u2003"), hrow(e="caf\u00e9"),
        hrow(e="back\\slash"), hrow(e="tab\there"), hrow(e="\u0001ctl"), hrow(p=""), hrow(p="  "),
        hrow(e="x" * 70000), hrow(d="\U0001F600"), "", "", hrow(), "1,2,3", hrow() + ",extra",
        hrow(t="2005-01-03T10:00:00+05:30"), hrow(t="2005-01-03T10:00:00.123"), hrow(n="1E5"),
        hrow(n="-1.5e-7"), hrow(n="00012"), hrow(a="0x10")]
(root / "hospital").mkdir(parents=True, exist_ok=True)
(root / "hospital" / "plain.csv").write_bytes(("\ufeff" + H + "\n" + "\n".join(rows) + "\n").encode())
(root / "hospital" / "crlf.csv").write_bytes((H + "\r\n" + "\r\n".join(rows[:12]) + "\r\n").encode())
(root / "hospital" / "quoted.csv").write_text(H + "\n" + hrow(e='"with, comma"') + "\n" + hrow(e='"multi\nline"') + "\n" + hrow(e='a"b') + "\n" + "\n".join(rows[:6]) + "\n")
(root / "hospital" / "noeol.csv").write_text(H + "\n" + hrow(p="9") + "\n" + hrow(p="9"))
S = dict(patient="A", event_type="ER Registration", timestamp="2014-01-01T00:00:00", resource="A",
         crp=None, leucocytes=None, lacticacid=None, age=90.0, value=None)
def j(**kw): return json.dumps(dict(S, **kw))
lines = [j(), j(), j(crp=12), j(crp=12.5), j(crp="13"), j(crp="abc"), j(crp=True), j(leucocytes=9.6),
         j(leucocytes=12), j(leucocytes=True), j(leucocytes={"k": 1}), j(leucocytes=[1, 2]), j(age=2**70),
         j(age=1e300), '{"patient": "B", "timestamp": "2014-01-01", "crp": NaN}', '{"patient": "B", "timestamp": "2014-01-01", "crp": Infinity}',
         '{"patient": "B", "timestamp": "2014-01-01", "crp": 1e400}', j(timestamp=20140101), j(timestamp=None),
         j(timestamp="2014-01-01T00:00:00.000001"), "", "   ", "[1, 2]", "{not json", '"text"', "null",
         j()[:-1] + ', "patient": "Z"}', j(extra="x"), json.dumps({"patient": "C", "timestamp": "2014-01-02"}),
         j(patient="\u00e9\u00e8"), j(patient="q\"uote"), j(resource="x" * 70000), j(event_type="a\u2028b"),
         j(patient=" "), j(patient=""), j(value=-0.0), j(value=1e16), j(value=0.1 + 0.2)]
(root / "sepsis").mkdir(parents=True, exist_ok=True)
(root / "sepsis" / "a.jsonl").write_text("\n".join(lines) + "\n")
(root / "sepsis" / "crlf.jsonl").write_bytes(("\r\n".join(lines[:10]) + "\r\n").encode())
(root / "sepsis" / "b.jsonl").write_text("\n".join(lines[:4]))
C = "event_id,patient,type,value,unit,ts"
(root / "chemo_mw").mkdir(parents=True, exist_ok=True)
(root / "chemo_mw" / "a.csv").write_text(C + "\ne1,1,C,1.5,mg,2010-07-03T00:00:00\ne2,1,B,7,u,2010-07-04T00:00:00\n"
    "e1,1,C,1.5,mg,2010-07-03T00:00:00\ne2,1,B,8,u,2010-07-04T00:00:00\n,1,C,1,mg,2010-07-05T00:00:00\n  ,1,C,1,mg,2010-07-05T00:00:00\n"
    "e9,1,C,1,mg,1900-01-01T00:00:00\ne10,1,C,1,mg,2010-07-06\n")
(root / "chemo_mw" / "b.csv").write_text(C + "\ne1,1,C,1.5,mg,2010-07-03T00:00:00\ne3,1,C,2,mg,2010-07-05T00:00:00\ne10,1,C,1,mg,2010-07-07\n")
# as exporters write it: text quoted, numbers and times not; some quoted fields hold a comma
# or a doubled quote (Python's reader reads those), some are empty
quoted_rows = ['"1","x",2005-01-03,"4101",1.0,"Rad","S","m",33.0',
               '"1","x",2005-01-03,"4101",1.0,"Rad","S","m",33.0',
               '"2","",2005-01-04 10:00:00,"",2.5,"R, ad","S","say ""hi""",',
               '"3","y",2005-01-05,"4101","abc","Rad","S","m",33.0',
               '"4","y",2005-01-05,"4101",1.0,"Rad","S"',
               '"5","é",2005-01-06T00:00:00.000000Z,"4101",1.0,"Rad","S","m",34.0',
               '"1","x",2005-01-03,"4101",1.0,"Rad","S","m",33.0']
(root / "hospital" / "exported.csv").write_text(
    ",".join(f'"{c}"' for c in H.split(",")) + "\n" + "\n".join(quoted_rows * 40) + "\n")
# the same files compressed (read on columns as they are decompressed), and one with a
# lone carriage return (read by Python's readers)
import gzip  # noqa: E402

for src, name in (("hospital", "plain.csv"), ("hospital", "exported.csv"), ("sepsis", "a.jsonl")):
    data = (root / src / name).read_bytes()
    (root / src / (name.replace(".", "_z.") + ".gz")).write_bytes(gzip.compress(data, mtime=0))
(root / "hospital" / "lone_cr.csv.gz").write_bytes(gzip.compress(
    (H + "\n" + hrow(p="7") + "\r" + hrow(p="8") + "\n").encode(), mtime=0))
