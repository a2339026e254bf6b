-- Stand-in for slurmctld's job_submit/lua API (Slurm 22.05), then cases.
local script, grants_dir, refusals_dir = arg[1], os.tmpname(), os.tmpname()
os.remove(grants_dir)
os.remove(refusals_dir)
os.execute("mkdir -p " .. grants_dir .. " " .. refusals_dir)

local messages = {}
slurm = {
	SUCCESS = 0,
	ERROR = -1,
	-- Slurm 22.05's values (slurm_errno.h).
	ESLURM_ACCESS_DENIED = 2002,
	ESLURM_INVALID_NODE_COUNT = 2006,
	ESLURM_INVALID_TIME_LIMIT = 2051,
	log_user = function(fmt, ...) table.insert(messages, string.format(fmt, ...)) end,
	log_info = function() end,
	reservations = {
		pilot_4242 = { users = "alice,carol", duration = 43200 },
		pilot_77 = { users = "bob" },
		maint = { users = "alice" },
	},
	-- slurmctld's job table: job id -> record (job_state, spank_job_env,
	-- resv_name, submit_time).
	jobs = {},
}
assert(dofile(script) == slurm.SUCCESS, "the script must return slurm.SUCCESS")
GRANTS_DIR = grants_dir
REFUSALS_DIR = refusals_dir

-- Grant records as `pilot grant` writes them (pretty JSON).
local function grant(job, user, nodes, minutes)
	local f = assert(io.open(grants_dir .. "/" .. job .. ".json", "w"))
	f:write(string.format('{\n  "duration_minutes": %d,\n  "identity": null,\n  "job_id": %d,\n' ..
		'  "nodes": %d,\n  "reservation": "pilot_%d",\n  "user": "%s"\n}\n', minutes, job, nodes, job, user))
	f:close()
end
grant(4242, "alice", 2, 30 * 1440)
grant(77, "bob", 1, 10 * 1440)
-- The job's spank_job_env as slurmctld hands it over (indexed from 0).
local function run(job) return { [0] = "SLURM_PILOT_CONFIG_X=1", [1] = "SLURM_PILOT_RUN=" .. job } end
-- The batch script `pilot run JOB` submits (job/binding.cc, BoundRunScript).
local function bound_script(job)
	return "#!/bin/sh\n" ..
		"# slurm-pilot: the run piloted by job " .. job .. ". Its tasks run the pilot's program.command\n" ..
		"# in place of this script (spank_pilot(8), BINDING); submitted by `pilot run " .. job .. "`.\n" ..
		"echo \"pilot: job $SLURM_JOB_ID: the run of pilot " .. job .. " needs spank_pilot.so on its node\" >&2\n" ..
		"exit 1\n"
end
-- A bound job's script unless the case gives one (false: none, an allocation).
function script_of(env)
	for _, e in pairs(env) do
		local job = string.match(e, "^SLURM_PILOT_RUN=(%d+)$")
		if job then return bound_script(job) end
	end
	return nil
end

local DAY = 1440
local JOB_PENDING, JOB_RUNNING, JOB_COMPLETE = 0, 1, 3
local failures = 0
local next_job = 100
local function case(name, job, want_rc, want_text)
	messages = {}
	job.user_name = job.user_name or "alice"
	if job.spank_job_env ~= nil and job.script == nil then job.script = script_of(job.spank_job_env) end
	if job.script == false then job.script = nil end
	local parts = job.parts or { { name = "gpu", default_time = 4294967294, max_time = 60 * DAY } }
	local rc = slurm_job_submit(job, parts, 1001)
	if rc == slurm.SUCCESS and job.spank_job_env ~= nil then
		-- The admitted run appears in the job table and ends, so that the
		-- next case's run is the only one.
		next_job = next_job + 1
		slurm.jobs[tostring(next_job)] = { job_state = JOB_COMPLETE, spank_job_env = job.spank_job_env,
			resv_name = job.reservation, submit_time = os.time() }
	end
	local ok = rc == want_rc
	if ok and want_text then ok = messages[1] ~= nil and string.find(messages[1], want_text, 1, true) ~= nil end
	if not ok then
		failures = failures + 1
		print("FAIL " .. name .. ": rc " .. tostring(rc) .. " " .. tostring(messages[1]))
	else
		print("ok " .. name)
	end
end

case("short job", { time_limit = 2 * DAY }, slurm.SUCCESS)
case("exactly the limit", { time_limit = 7 * DAY }, slurm.SUCCESS)
case("long job without reservation", { time_limit = 20 * DAY }, slurm.ERROR, "pilot verdict")
case("message names the man page", { time_limit = 20 * DAY }, slurm.ERROR, "pilot(1)")
case("long job in its pilot reservation", { time_limit = 20 * DAY, reservation = "pilot_4242", spank_job_env = run(4242) },
	slurm.SUCCESS)
case("no --pilot-run", { time_limit = 20 * DAY, reservation = "pilot_4242" }, slurm.ERROR, "--pilot-run=4242")
case("--pilot-run names another pilot", { time_limit = 20 * DAY, reservation = "pilot_4242", spank_job_env = run(77) },
	slurm.ERROR, "it names 77")
case("nodes within the grant", { time_limit = 20 * DAY, reservation = "pilot_4242", spank_job_env = run(4242),
	min_nodes = 2 }, slurm.SUCCESS)
case("more nodes than granted", { time_limit = 20 * DAY, reservation = "pilot_4242", spank_job_env = run(4242),
	min_nodes = 3 }, slurm.ERROR, "asks for 3 nodes")
case("longer than granted", { time_limit = 31 * DAY, reservation = "pilot_4242", spank_job_env = run(4242) },
	slurm.ERROR, "exceeds the grant")
case("second listed user of the reservation, not of the grant",
	{ time_limit = 20 * DAY, reservation = "pilot_4242", user_name = "carol", spank_job_env = run(4242) },
	slurm.ERROR, "not granted to carol")
case("someone else's reservation", { time_limit = 20 * DAY, reservation = "pilot_77", spank_job_env = run(77) },
	slurm.ERROR, "not granted to alice")
case("not a pilot reservation", { time_limit = 20 * DAY, reservation = "maint" }, slurm.ERROR,
	"not a pilot_* reservation")
case("unknown pilot reservation", { time_limit = 20 * DAY, reservation = "pilot_9" }, slurm.ERROR,
	"does not exist")
case("several reservations", { time_limit = 20 * DAY, reservation = "maint,pilot_4242", spank_job_env = run(4242) },
	slurm.SUCCESS)
case("no --time: partition maximum 60 days", { time_limit = 4294967294 }, slurm.ERROR, "60.0 days")
case("no --time: partition default 1 day",
	{ time_limit = 4294967294, parts = { { name = "gpu", default_time = DAY, max_time = 60 * DAY } } },
	slurm.SUCCESS)
case("unlimited", { time_limit = 4294967295 }, slurm.ERROR, "unlimited")
case("unlimited in a reservation", { time_limit = 4294967295, reservation = "pilot_4242", spank_job_env = run(4242) },
	slurm.ERROR, "exceeds the grant")

-- Without the reservation table: the grant records of `pilot grant`.
slurm.reservations = nil
case("grant record", { time_limit = 20 * DAY, reservation = "pilot_4242", spank_job_env = run(4242) }, slurm.SUCCESS)
case("grant record of another user",
	{ time_limit = 20 * DAY, reservation = "pilot_4242", user_name = "bob", spank_job_env = run(4242) },
	slurm.ERROR, "not granted to bob")
case("no grant record", { time_limit = 20 * DAY, reservation = "pilot_5", spank_job_env = run(5) }, slurm.ERROR,
	"does not exist")

-- A table copy older than the reservation (created in the second of the
-- last refresh): the grant record answers.
slurm.reservations = { pilot_77 = { users = "bob" }, pilot_8 = { users = "alice" } }
case("reservation newer than the table", { time_limit = 20 * DAY, reservation = "pilot_4242", spank_job_env = run(4242) },
	slurm.SUCCESS)
case("newer reservation, another user",
	{ time_limit = 20 * DAY, reservation = "pilot_4242", user_name = "bob", spank_job_env = run(4242) },
	slurm.ERROR, "not granted to bob")
case("in neither", { time_limit = 20 * DAY, reservation = "pilot_5" }, slurm.ERROR, "does not exist")
case("in the table", { time_limit = 9 * DAY, reservation = "pilot_77", user_name = "bob", spank_job_env = run(77) },
	slurm.SUCCESS)
case("a reservation without a grant record", { time_limit = 9 * DAY, reservation = "pilot_8", spank_job_env = run(8) },
	slurm.ERROR, "no readable grant record")

-- One grant, one run: a second bound run while one holds the grant, an
-- array, and a run admitted a moment ago that the table does not list yet.
slurm.jobs["900"] = { job_state = JOB_PENDING + 0x400, spank_job_env = run(4242), resv_name = "pilot_4242",
	submit_time = os.time() }
case("a second run while one is pending (requeued)", { time_limit = 20 * DAY, reservation = "pilot_4242",
	spank_job_env = run(4242) }, slurm.ERROR, "job 900 is pending")
case("a short bound run while one is pending", { time_limit = DAY, spank_job_env = run(4242) }, slurm.ERROR,
	"one run at a time")
slurm.jobs["900"].job_state = JOB_RUNNING
case("a second run while one is running", { time_limit = 20 * DAY, reservation = "pilot_4242",
	spank_job_env = run(4242) }, slurm.ERROR, "job 900 is running")
slurm.jobs["900"].job_state = JOB_COMPLETE
case("a run after the first ended", { time_limit = 20 * DAY, reservation = "pilot_4242", spank_job_env = run(4242) },
	slurm.SUCCESS)
case("an array", { time_limit = 20 * DAY, reservation = "pilot_4242", spank_job_env = run(4242), array_inx = "0-9" },
	slurm.ERROR, "not an array")
case("a short bound array", { time_limit = 60, spank_job_env = run(77), array_inx = "0-1" }, slurm.ERROR,
	"not an array")
local before = {}  -- the table as it was before the next run, its runs older
for id, j in pairs(slurm.jobs) do
	before[id] = { job_state = j.job_state, spank_job_env = j.spank_job_env, resv_name = j.resv_name,
		submit_time = os.time() - 10 }
end
case("the first run", { time_limit = 20 * DAY, reservation = "pilot_4242", spank_job_env = run(4242) }, slurm.SUCCESS)
slurm.jobs = before
case("a run just after it, the table not refreshed", { time_limit = 20 * DAY, reservation = "pilot_4242",
	spank_job_env = run(4242) }, slurm.ERROR, "admitted 0 s ago")
slurm.jobs = { ["950"] = { job_state = JOB_COMPLETE, spank_job_env = run(4242), submit_time = os.time() },
	["951"] = { job_state = JOB_COMPLETE, spank_job_env = run(77), submit_time = os.time() } }
case("once the table shows it ended", { time_limit = 20 * DAY, reservation = "pilot_4242", spank_job_env = run(4242) },
	slurm.SUCCESS)
-- The script as `pilot run` submits it (its C++ spelling, job/binding.cc).
if arg[2] ~= nil and arg[2] ~= "" then
	local f = assert(io.open(arg[2]))
	local text = f:read("*a")
	f:close()
	assert(text ~= "", "pilot run --dry-run printed no script")
	case("the script `pilot run` submits", { time_limit = 20 * DAY, reservation = "pilot_4242",
		spank_job_env = run(4242), script = text }, slurm.SUCCESS)
else
	print("note: no `pilot run` script given: its spelling is not checked against the script's")
end
case("a script of its own", { time_limit = 20 * DAY, reservation = "pilot_4242", spank_job_env = run(4242),
	script = "#!/bin/sh\necho ARBITRARY\n" }, slurm.ERROR, "not a script of its own: submit it with `pilot run 4242")
case("the script of another pilot's run", { time_limit = 20 * DAY, reservation = "pilot_4242",
	spank_job_env = run(4242), script = bound_script(77) }, slurm.ERROR, "not a script of its own")
case("an allocation (salloc)", { time_limit = 20 * DAY, reservation = "pilot_4242", spank_job_env = run(4242),
	script = false }, slurm.ERROR, "not a command of its own")
case("a short job in a pilot reservation without --pilot-run", { time_limit = 60, reservation = "pilot_4242" },
	slurm.ERROR, "runs only its pilot's run")
case("a short job that names its pilot outside the reservation", { time_limit = 60, spank_job_env = run(77),
	user_name = "bob" }, slurm.SUCCESS)

-- Changes after admission: the code Slurm answers with, and the record
-- `pilot explain` reads.
local function record(job)
	local f = io.open(refusals_dir .. "/" .. job .. ".json")
	if f == nil then return "" end
	local text = f:read("*a")
	f:close()
	os.remove(refusals_dir .. "/" .. job .. ".json")
	return text
end
local bound = { job_id = 31, resv_name = "pilot_4242", user_name = "alice", spank_job_env = run(4242), min_nodes = 1,
	time_limit = 20 * DAY, partition = "gpu" }
local function modify(name, desc, rec, uid, want_rc, want_text)
	local rc = slurm_job_modify(desc, rec, {}, uid)
	local text = record(rec.job_id or 0)
	local ok = rc == want_rc
	if ok and want_text then ok = string.find(text, want_text, 1, true) ~= nil end
	if ok and not want_text and text ~= "" then ok = false end
	if not ok then
		failures = failures + 1
		print("FAIL modify " .. name .. ": rc " .. tostring(rc) .. " " .. text)
	else
		print("ok modify " .. name)
	end
end
modify("extension without a grant", { time_limit = 20 * DAY }, { job_id = 30, resv_name = "", user_name = "alice" },
	1001, slurm.ESLURM_INVALID_TIME_LIMIT, '"reason": "it names no reservation"')
modify("within the grant", { time_limit = 21 * DAY }, bound, 1001, slurm.SUCCESS)
modify("past the grant", { time_limit = 40 * DAY }, bound, 1001, slurm.ESLURM_INVALID_TIME_LIMIT,
	"exceeds the grant of job 4242")
modify("reservation removed", { reservation = "" }, bound, 1001, slurm.ESLURM_ACCESS_DENIED,
	'"reason": "a run bound to pilot 4242 stays in reservation pilot_4242 (asked for none)"')
modify("another reservation", { reservation = "maint" }, bound, 1001, slurm.ESLURM_ACCESS_DENIED,
	'"change": "Reservation=maint"')
modify("the same reservation", { reservation = "pilot_4242" }, bound, 1001, slurm.SUCCESS)
modify("more nodes", { min_nodes = 3, max_nodes = 3 }, bound, 1001, slurm.ESLURM_INVALID_NODE_COUNT,
	"at most 2 node(s), the grant's (asked for 3)")
modify("a larger maximum", { max_nodes = 5 }, bound, 1001, slurm.ESLURM_INVALID_NODE_COUNT, "(asked for 5)")
modify("nodes within the grant", { min_nodes = 2, max_nodes = 2 }, bound, 1001, slurm.SUCCESS)
modify("another partition", { partition = "debug" }, bound, 1001, slurm.ESLURM_ACCESS_DENIED,
	"stays in partition gpu (asked for debug)")
modify("an array", { array_inx = "4" }, bound, 1001, slurm.ESLURM_ACCESS_DENIED, "is one job, not an array")
modify("another field", { name = "renamed" }, bound, 1001, slurm.SUCCESS)
modify("a bound run outside the reservation", { reservation = "pilot_4242" },
	{ job_id = 32, user_name = "alice", spank_job_env = run(4242), min_nodes = 1, time_limit = 60 }, 1001,
	slurm.ESLURM_ACCESS_DENIED, "stays in reservation (none) (asked for pilot_4242)")
modify("an unbound job moved into a pilot reservation", { reservation = "pilot_4242" },
	{ job_id = 33, user_name = "alice", min_nodes = 1, time_limit = 60 }, 1001, slurm.ESLURM_ACCESS_DENIED,
	'"pilot_job": 4242')
modify("a record with a quote", { partition = 'a"b\\c' }, bound, 1001, slurm.ESLURM_ACCESS_DENIED,
	[[(asked for a\"b\\c)"]])
modify("by root", { time_limit = 40 * DAY, reservation = "" }, bound, 0, slurm.SUCCESS)

os.remove(grants_dir .. "/4242.json")
os.remove(grants_dir .. "/77.json")
os.remove(grants_dir)
os.remove(refusals_dir)
if failures > 0 then
	print(failures .. " failed")
	os.exit(1)
end
