#include "server/session.h"

#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(SessionStore, CreatesUnguessableIdsAndFindsThem) {
  int64_t now = 1000;
  SessionStore store([&] { return now; });
  std::set<std::string> ids;
  for (int i = 0; i < 100; ++i) {  // 100 users: no per-user cap applies
    Session s = store.Create("tok", {"ana" + std::to_string(i), "vision", "team-lead"});
    EXPECT_EQ(s.id.size(), 64u);
    EXPECT_EQ(s.csrf_token.size(), 64u);
    EXPECT_NE(s.id, s.csrf_token);
    ids.insert(s.id);
  }
  EXPECT_EQ(ids.size(), 100u);
  auto found = store.Find(*ids.begin());
  ASSERT_TRUE(found);
  EXPECT_EQ(found->bearer_token, "tok");
  EXPECT_EQ(found->who.team, "vision");
  EXPECT_FALSE(store.Find("not-a-session"));
  EXPECT_FALSE(store.Find(""));
}

TEST(SessionStore, EndsOnIdleTimeoutMaxAgeAndSignOut) {
  int64_t now = 0;
  SessionStore store([&] { return now; }, SessionLimits{.idle_timeout_s = 100, .max_age_s = 250});
  Session s = store.Create("tok", {"ana", "vision", "member"});
  now = 90;
  EXPECT_TRUE(store.Find(s.id));  // refreshes the idle timer
  now = 180;
  EXPECT_TRUE(store.Find(s.id));
  now = 260;  // past max age although used 80 s ago
  EXPECT_FALSE(store.Find(s.id));
  EXPECT_EQ(store.Size(), 0u);

  Session idle = store.Create("tok", {"ana", "vision", "member"});
  now += 101;
  EXPECT_FALSE(store.Find(idle.id));

  Session out = store.Create("tok", {"ana", "vision", "member"});
  EXPECT_TRUE(store.End(out.id));
  EXPECT_FALSE(store.End(out.id));
  EXPECT_FALSE(store.Find(out.id));
}

TEST(SessionStore, EvictsTheLeastRecentlySeenBeyondTheCap) {
  int64_t now = 0;
  SessionStore store([&] { return now; }, SessionLimits{.max_sessions = 2});
  Session a = store.Create("a", {});
  now = 1;
  Session b = store.Create("b", {});
  now = 2;
  ASSERT_TRUE(store.Find(a.id));  // a is now the more recently seen
  now = 3;
  Session c = store.Create("c", {});
  EXPECT_TRUE(store.Find(a.id));
  EXPECT_FALSE(store.Find(b.id));
  EXPECT_TRUE(store.Find(c.id));
}

TEST(SessionStore, CapsEachUsersSessionsEndingThatUsersLeastRecentlySeen) {
  int64_t now = 0;
  SessionStore store([&] { return now; }, SessionLimits{.max_per_user = 3});
  Session lead = store.Create("l", {"lead", "vision", "team-lead"});
  std::vector<Session> viewer;
  for (int i = 0; i < 3; ++i, ++now) viewer.push_back(store.Create("v", {"viewer", "vision", "viewer"}));
  ASSERT_TRUE(store.Find(viewer[0].id));  // now the most recently seen of the viewer's
  ++now;
  Session fourth = store.Create("v", {"viewer", "vision", "viewer"});
  EXPECT_TRUE(store.Find(viewer[0].id));
  EXPECT_FALSE(store.Find(viewer[1].id));  // the least recently seen ended
  EXPECT_TRUE(store.Find(viewer[2].id));
  EXPECT_TRUE(store.Find(fourth.id));
  for (int i = 0; i < 1000; ++i) store.Create("v", {"viewer", "vision", "viewer"});
  EXPECT_TRUE(store.Find(lead.id));  // another user's sign-ins never end it, the oldest of all
  EXPECT_EQ(store.Size(), 4u);

  std::vector<SessionEvictions> ended = store.TakeEvictions();
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].user, "viewer");
  EXPECT_EQ(ended[0].count, 1001);
  EXPECT_EQ(ended[0].cap, 3u);
  EXPECT_FALSE(ended[0].all_users);
  EXPECT_TRUE(store.TakeEvictions().empty());  // taken once
  EXPECT_TRUE(store.End(lead.id));
  EXPECT_TRUE(store.TakeEvictions().empty());  // a sign-out is no eviction
}

TEST(SessionStore, TheGlobalCapIsRecordedAgainstTheUserWhoseSessionEnded) {
  int64_t now = 0;
  SessionStore store([&] { return now; }, SessionLimits{.max_sessions = 2, .max_per_user = 5});
  store.Create("a", {"ana", "", "member"});
  ++now;
  store.Create("b", {"bo", "", "member"});
  ++now;
  store.Create("c", {"cy", "", "member"});
  std::vector<SessionEvictions> ended = store.TakeEvictions();
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].user, "ana");
  EXPECT_TRUE(ended[0].all_users);
  EXPECT_EQ(ended[0].cap, 2u);
}

TEST(Cookies, ParsesTheSessionCookieAmongOthers) {
  EXPECT_EQ(CookieValue("a=1; tessera_session=abc; b=2", kSessionCookie), "abc");
  EXPECT_EQ(CookieValue("tessera_session=xyz", kSessionCookie), "xyz");
  EXPECT_EQ(CookieValue("tessera_sessionx=1; x_tessera_session=2", kSessionCookie), "");
  EXPECT_EQ(CookieValue("", kSessionCookie), "");
}

TEST(Cookies, SessionCookieIsHttpOnlyAndSameSiteStrict) {
  Session s;
  s.id = "abc";
  std::string h = SessionCookieHeader(s, 60, false);
  EXPECT_NE(h.find("tessera_session=abc"), std::string::npos);
  EXPECT_NE(h.find("HttpOnly"), std::string::npos);
  EXPECT_NE(h.find("SameSite=Strict"), std::string::npos);
  EXPECT_NE(h.find("Path=/"), std::string::npos);
  EXPECT_EQ(h.find("Secure"), std::string::npos);
  EXPECT_NE(SessionCookieHeader(s, 60, true).find("; Secure"), std::string::npos);
  EXPECT_NE(ClearSessionCookieHeader(false).find("Max-Age=0"), std::string::npos);
}

TEST(ConstantTimeEquals, ComparesWholeStrings) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "ab"));
  EXPECT_FALSE(ConstantTimeEquals("", "a"));
}

}  // namespace
}  // namespace tessera
